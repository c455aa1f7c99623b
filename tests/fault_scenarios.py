"""The fault scenarios, sized by their caller: `tests/test_faults.py` runs them small,
`bench/fault` at full size. Each returns a `Tally` of what was acknowledged, lost and doubled.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from tests.fault_support import Sender, Tally, burst, fault_bed, tally
from tests.support import wait_for

# Handling waits long enough for a slow shared machine, never on a fixed pace.
SETTLE_SECONDS = 120.0


def redeliveries(directory: Path, count: int) -> Tally:
    """Two replicas and a worker; `count` deliveries and 10 % of them delivered twice, the
    copies spread over both replicas: every delivery is handled once."""
    with fault_bed(directory) as bed:
        replicas = [bed.replica(), bed.replica()]
        bed.worker()
        sender = Sender([r.url for r in replicas])
        sender.send(burst(count))
        wait_for(lambda: bed.settled(count), timeout=SETTLE_SECONDS, interval=0.5)
        return tally(bed, sender.acked)


def replica_killed(directory: Path, count: int) -> Tally:
    """Two replicas (each with an inbox worker) and a worker; one replica is SIGKILLed when a
    third of the burst is acknowledged. The sender delivers again what was not acknowledged:
    every acknowledged delivery is handled once, none twice."""
    with fault_bed(directory, THE_LOOP_INBOX_LEASE_SECONDS="5") as bed:
        replicas = [bed.replica(), bed.replica()]
        bed.worker()
        sender = Sender([r.url for r in replicas])
        victim = replicas[0]

        def kill_when_a_third_is_in() -> None:
            while len(sender.acked) < count // 3:
                time.sleep(0.01)
            sender.drop(victim.url)
            victim.kill(signal.SIGKILL)

        killer = threading.Thread(target=kill_when_a_third_is_in, daemon=True)
        killer.start()
        sender.send(burst(count, redelivered=0))
        killer.join(timeout=30)
        assert victim.popen.returncode == -signal.SIGKILL
        wait_for(lambda: bed.settled(len(sender.acked)), timeout=SETTLE_SECONDS, interval=0.5)
        return tally(bed, sender.acked)
