"""The model gateway: a session reaches the model only through it, holding a pass that dies
with the session, while the operator's credential stays in the spawner. It relays each
answer unchanged and counts its tokens per work item (relay, passes, forwarding, metering).
"""

from app.gateway.access import (
    CREDENTIAL_VARIABLES,
    ModelAccess,
    SessionModel,
    open_model_access,
    openai_upstream_for,
    upstream_for,
)
from app.gateway.forwarding import Upstream
from app.gateway.framing import (
    CONTINUE,
    END,
    LAST_CHUNK,
    AnswerFraming,
    AnswerHead,
    FramingError,
    Headers,
    RequestHead,
    SessionRequests,
    UpstreamAnswers,
    field_allowed,
    request_bytes,
    status_head,
)
from app.gateway.metering import COUNTED, Usage
from app.gateway.passes import is_pass_tail
from app.gateway.transport import UnsupportedProtocol
from app.gateway.wires import messages_counts

__all__ = [
    "CONTINUE",
    "COUNTED",
    "CREDENTIAL_VARIABLES",
    "END",
    "LAST_CHUNK",
    "AnswerFraming",
    "AnswerHead",
    "FramingError",
    "Headers",
    "ModelAccess",
    "RequestHead",
    "SessionModel",
    "SessionRequests",
    "UnsupportedProtocol",
    "Upstream",
    "UpstreamAnswers",
    "Usage",
    "field_allowed",
    "is_pass_tail",
    "messages_counts",
    "open_model_access",
    "openai_upstream_for",
    "request_bytes",
    "status_head",
    "upstream_for",
]
