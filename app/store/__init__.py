"""The database: one engine per process, Alembic migrations, SQLite or PostgreSQL, and the
tables, queues and leases the App keeps in it."""

from app.store import inbox, jobqueue, jobwake, log_lease
from app.store.engines import is_postgres, make_engine, migrate
from app.store.inbox import requeue
from app.store.jobqueue import (
    announce,
    cancel,
    claimed_jobs,
    lease_lapsed,
    offer_failed,
    queue_job,
    retarget,
)
from app.store.jobwake import JobSignal
from app.store.lanes import Turns, lane_of
from app.store.log_lease import LogState
from app.store.retention import PeriodicPrune, Pruned, Retention, prune
from app.store.session_factory import Sessions, hooked
from app.store.sqlite_writes import statement_journals_in_memory
from app.store.tables import (
    Delivery,
    DeliveryLogState,
    Event,
    InboxState,
    Installation,
    Job,
    JobKind,
    JobState,
    ModelVerdict,
    Once,
    Origin,
    Repository,
    SessionToken,
    SlackOutbox,
    Spawner,
    SpendDay,
    WorkItem,
    WorkItemStatus,
    WorkItemUsage,
    aware,
    compress_body,
    driver_time,
    utcnow,
)
from app.store.wal_checkpoints import look_after

__all__ = [
    "Delivery",
    "DeliveryLogState",
    "Event",
    "InboxState",
    "Installation",
    "Job",
    "JobKind",
    "JobSignal",
    "JobState",
    "LogState",
    "ModelVerdict",
    "Once",
    "Origin",
    "PeriodicPrune",
    "Pruned",
    "Repository",
    "Retention",
    "SessionToken",
    "Sessions",
    "SlackOutbox",
    "Spawner",
    "SpendDay",
    "Turns",
    "WorkItem",
    "WorkItemStatus",
    "WorkItemUsage",
    "announce",
    "aware",
    "cancel",
    "claimed_jobs",
    "compress_body",
    "driver_time",
    "hooked",
    "inbox",
    "is_postgres",
    "jobqueue",
    "jobwake",
    "lane_of",
    "lease_lapsed",
    "log_lease",
    "look_after",
    "make_engine",
    "migrate",
    "offer_failed",
    "prune",
    "queue_job",
    "requeue",
    "retarget",
    "statement_journals_in_memory",
    "utcnow",
]
