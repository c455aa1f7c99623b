from app.fleet.api import LEASE_CONFIG
from app.fleet.api import bp as spawner_bp
from app.fleet.api_guard import loop_state
from app.fleet.checks_api import bp as checks_bp
from app.fleet.liveness import SpawnerSweep, is_dead
from app.fleet.phase_api import bp as phase_bp
from app.fleet.pull_api import bp as pulls_bp
from app.fleet.tokens import (
    SESSION_PREFIX,
    Principal,
    TokenError,
    authenticate,
    create_token,
    hash_token,
    revoke_spawner,
)

__all__ = [
    "LEASE_CONFIG",
    "SESSION_PREFIX",
    "Principal",
    "SpawnerSweep",
    "TokenError",
    "authenticate",
    "checks_bp",
    "create_token",
    "hash_token",
    "is_dead",
    "loop_state",
    "phase_bp",
    "pulls_bp",
    "revoke_spawner",
    "spawner_bp",
]
