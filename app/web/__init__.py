"""The operator's surfaces over HTTP: the status page at `/` and `/status` (JSON), behind the
operator credential (`THE_LOOP_ADMIN_TOKEN`).

`auth` decides who is the operator (pure), `queries` reads what is shown (plain values),
`present` words it (pure), `views` is the Flask blueprint; the page is server-rendered from
the Jinja2 templates beside them and runs no script.
"""

from __future__ import annotations

from app.web.metrics import Meters
from app.web.metrics import bp as metrics_bp
from app.web.setup_page import build_setup_app
from app.web.views import bp as web_bp

__all__ = ["Meters", "build_setup_app", "metrics_bp", "web_bp"]
