"""The operator's surfaces over HTTP: the status page at `/` and `/status` (JSON), behind the
operator credential (`THE_LOOP_ADMIN_TOKEN`).

`auth` decides who is the operator (pure), `queries` reads what is shown (plain values),
`present` words it (pure), `views` is the Flask blueprint; the page is server-rendered from
the Jinja2 templates beside them and runs no script.
"""

from __future__ import annotations
