"""A life on an engine inside the driver (RocksDB's): the driver in a cgroup of its own, the
kernel's charge of it over the life, and under a limit a kill for memory as its outcome."""

from __future__ import annotations

import os
import signal

from alloclab.answers import life
from alloclab.clients import driver
from alloclab.core.errors import AlloclabError
from alloclab.host.placement import ChargeWatch, MemoryLimit
from alloclab.run.kinds import EmbeddedKind
from alloclab.run.target import InProcess
from alloclab.workloads.life_runs import Measured, shape_tag


class EmbeddedLifeTarget(InProcess):
    """The driver with its engine, in a cgroup of its own: the kernel's charge of it over the life.
    Under a limit (server_memory_bytes: the lives that check a limit), a driver the kernel killed
    for memory ends its life as an outcome, proved by the cgroup's OOM-kill counter."""

    charge, charge_error, cgroup, oom_error = None, None, None, None
    driver_killed = False  # by the kernel, for memory: the life's outcome (run.execute, Measured.outcome)
    oom_at_start = 0  # the cgroup's OOM-kill counter before the driver started (a reused cgroup keeps its count)

    def start(self) -> None:
        try:
            self.cgroup = MemoryLimit(f"alloclab-{os.getpid()}-{self.spec.index}", self.spec.server_memory_bytes)
            self.join = self.cgroup.attach
            if self.spec.server_memory_bytes:
                self.oom_at_start = life.oom_kills(self.cgroup.oom_counter().read_text())
        except AlloclabError as e:
            self.charge_error = str(e)
            if self.spec.server_memory_bytes:
                raise
        super().start()
        if self.cgroup is not None:
            self.charge = ChargeWatch(self.cgroup).start()

    def stop(self) -> str | None:
        if self.charge is not None:
            self.charge.end()
        if self.cgroup is not None and self.spec.server_memory_bytes and self.client is not None \
                and self.client.returncode == -signal.SIGKILL:
            try:
                self.driver_killed = life.oom_kills(self.cgroup.oom_counter().read_text()) > self.oom_at_start
            except (OSError, AlloclabError) as e:
                self.oom_error = str(e)
        why = super().stop()
        if self.cgroup is not None:
            self.cgroup.remove()
        return why


class EmbeddedLife(Measured, EmbeddedKind):
    """A life on an engine inside the driver (`alloclab-driver life`): the engine open throughout,
    its keys populated first, the allocator under test preloaded into the driver."""

    name = "embedded life"

    def target(self, spec, run_dir, node, data, events):
        return EmbeddedLifeTarget(spec, run_dir, node.scratch, driver.for_allocator(spec.allocator, node.exe), data,
                                  events)

    def row_fields(self, spec):
        c = spec.cell
        return {"pattern": shape_tag(c), "batch": c.batch, "key_bytes": c.key_bytes, "value_bytes": c.value_bytes,
                "client": ""}
