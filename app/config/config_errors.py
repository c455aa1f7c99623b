"""The config room's one exception root."""

from __future__ import annotations

from app.files import CoreError


class ConfigurationError(CoreError, ValueError):
    """What the App or a spawner was told cannot be used: the operator config
    (`ConfigError`) or the process settings (`SettingsError`). The room's one exception root:
    every exception it defines derives from it (`tests/house/test_exception_roots.py`)."""
