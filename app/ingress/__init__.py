"""What arrives over HTTP before any room acts on it: which credential and how much body
each door asks for (`doors`), and the counter strangers' refusals go through (`sampling`)."""

from app.ingress import doors
from app.ingress.budget import RETRY_AFTER_SECONDS, BodyBudget, Hold
from app.ingress.door_state import DoorState
from app.ingress.doors import (
    ADMITTED,
    GIT_BODY_SECONDS,
    GIT_MAX_BODY,
    GIT_PATH,
    SPAWNER_MAX_BODY,
    BodyClock,
    BodyCut,
    basic_password,
    git_busy,
)
from app.ingress.sampling import Record, SampledLog, cut
from app.ingress.slots import Slots
from app.ingress.wsgi_body import IdleInput, client_socket, declared_length_of, drop_body
from app.ingress.wsgi_doors import BodyDoors, WebhookDoor

__all__ = [
    "ADMITTED",
    "GIT_BODY_SECONDS",
    "GIT_MAX_BODY",
    "GIT_PATH",
    "RETRY_AFTER_SECONDS",
    "SPAWNER_MAX_BODY",
    "BodyBudget",
    "BodyClock",
    "BodyCut",
    "BodyDoors",
    "DoorState",
    "Hold",
    "IdleInput",
    "Record",
    "SampledLog",
    "Slots",
    "WebhookDoor",
    "basic_password",
    "client_socket",
    "cut",
    "declared_length_of",
    "doors",
    "drop_body",
    "git_busy",
]
