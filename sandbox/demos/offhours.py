"""The schedule part of ``accelops demo``: an evening sweep and a morning restore.

Played with the real clients on a started sandbox (part "jobs": the cluster, and
``pool_schedule``, which the sandbox's scheduler ticks every 5 simulated minutes),
with the schedule ``office-hours`` of the sandbox's config:

1. static pools are created through the GKE API, labelled onto the schedule
   (:mod:`sandbox.demos.offhours_pools`); a pod keeps the dev pool busy past the evening;
2. evening: the clock jumps to shortly before on-hours end on a weekday; tick by
   tick, pools are scaled to zero or (the multi-host slice) deleted, the busy pool
   is skipped with its reason, and removed on the first tick after its pod ends;
3. morning: the clock jumps to before the restore lead time; tick by tick, each
   pool comes back, and the time it is ready stands next to the window start;
4. the recreated slice is read back and compared with the spec it had;
5. accelerator-hours saved, from the audit rows pool_schedule published (read
   from the metrics topic through a subscription of the scenario's own); with
   BigQuery running, the ``pool_savings_daily`` view too, if it exists.

What pool_schedule did is read from what it leaves behind, as in production: its
log and its audit rows (:mod:`sandbox.demos.offhours_watch`). Time: the clock is slowed
to real time (speed 1) and jumped from tick to tick, so an evening and a night
take seconds and every tick lands on its five-minute mark (a jump wakes the
scheduler, which fires the tick that fell due). Its speed is put back at the end,
for whatever runs next.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sandbox.common.clockctl import SandboxClock
from sandbox.demos.offhours_cluster import Cluster, is_as_before, is_down
from sandbox.demos.offhours_pools import busy_pod, demo_pools
from sandbox.demos.offhours_report import Saving, flat_spec, ready_at, savings, spec_differences
from sandbox.demos.offhours_story import SETUP_BEFORE_CLOSE, Day, Story
from sandbox.demos.offhours_watch import Tick, TickWatch
from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT, tick_seconds
from shared import bigquery, gke
from shared.config import AccelopsConfig, load_config
from shared.config.offhours import Schedule
from shared.errors import AccelopsError
from shared.kube import PODS
from shared.metrics.names import Names
from shared.offhours.plan import OUTPUT_ONLY

__all__ = ["ScheduleDemoError", "run_schedule_scenario"]

SCHEDULE = "office-hours"
NAMESPACE = "research"  # where the busy pod runs (a team namespace)
POD = "dev-notebook"
BUSY_POOL, SLICE = "v5e-dev", "v5e-team"
SWEEP_BEFORE_CLOSE = dt.timedelta(minutes=10)
POD_ENDS_AFTER_CLOSE = dt.timedelta(minutes=72)
MORNING_BEFORE_RESTORE = dt.timedelta(minutes=10)
EVENING_LIMIT = dt.timedelta(hours=3)  # the sweep must be over by then
# Built on the pool_actions table; printed when BigQuery has it (scenario all).
SAVINGS_VIEW = "pool_savings_daily"
# Simulated time left before a tick for the cluster to catch up with a jump.
CATCH_UP = dt.timedelta(seconds=30)


class ScheduleDemoError(AccelopsError):
    pass


def _tick_interval(config: AccelopsConfig) -> dt.timedelta:
    """The time between two of pool_schedule's ticks (on the cron's marks: the
    scenario's moments are on them too)."""
    return dt.timedelta(seconds=tick_seconds(config.topics.pool_schedule))


def run_schedule_scenario(sandbox: Sandbox) -> dict[str, Any]:
    """Play the scenario on a started sandbox (part jobs); returns what happened."""
    config = load_config(str(sandbox.config))
    schedule = config.schedules[SCHEDULE]
    lead = (schedule.lead_time_minutes if schedule.lead_time_minutes is not None
            else config.pool_schedule.lead_time_minutes)
    clock = SandboxClock(sandbox.gke_url)
    speed = clock.speed()
    watch = TickWatch(sandbox.state_dir / "logs" / "pool_schedule.log", PROJECT,
                      config.topics.loadtest_metrics).start()
    try:
        clock.set_speed(1.0)
        day = Day.after(schedule, clock.now(), lead)
        found = _Scenario(config, schedule, clock, watch, day).play()
        if sandbox.has("bigquery"):
            print_savings_view(config)
        return found
    finally:
        clock.set_speed(speed)
        watch.close()


def print_savings_view(config: AccelopsConfig) -> None:
    """The savings view, when BigQuery has one. Nothing waits for it: the rows reach
    BigQuery through ingest_metrics, and the view is built elsewhere."""
    names = Names.of(PROJECT, config.metrics)
    try:
        if bigquery.table_fields(PROJECT, names.ref(SAVINGS_VIEW)) is None:
            return
        # Names.of validated the identifiers interpolated here.
        sql = f"SELECT * FROM {names.sql(SAVINGS_VIEW)} ORDER BY 1 LIMIT 20"  # noqa: S608
        rows = bigquery.query(PROJECT, sql)
    except AccelopsError as exc:
        print(f"   ({SAVINGS_VIEW} could not be read: {exc})")
        return
    print(f"   BigQuery view {SAVINGS_VIEW}: {len(rows)} row(s) so far")
    for found in rows:
        print("   " + ", ".join(f"{k}={v}" for k, v in found.items()))


class _Scenario:
    def __init__(self, config: AccelopsConfig, schedule: Schedule, clock: SandboxClock,
                 watch: TickWatch, day: Day) -> None:
        self.config, self.schedule, self.clock, self.watch, self.day = (
            config, schedule, clock, watch, day)
        self.every = _tick_interval(config)
        self.cluster = Cluster(config.slices.state_namespace)
        self.pools = demo_pools(SCHEDULE)
        self.story = Story(day)

    def tick(self, at: dt.datetime) -> Tick:
        """Jump to ``at`` and wait for the tick it makes due.

        The scheduler fires a tick when the clock reaches the previous one plus the
        interval, then counts from there. A jump further than that fires one on
        landing, so a run of ticks starts with one: the ticks after it land on their
        marks. Within a run, a jump wakes the scheduler, GKE and the cluster's
        controllers at once: the clock stops short first, for the cluster to catch
        up with the operations that finished meanwhile (nodes come and go), as it
        would in five real minutes, so the tick sees what it would have seen.
        """
        if at - self.clock.now() <= self.every:
            self.clock.advance_to(at - CATCH_UP)
        self.cluster.wait_for("the cluster's nodes to match GKE", self.cluster.settled)
        self.clock.advance_to(at)
        tick = self.watch.tick_at(at)
        self.story.tick(tick)
        return tick

    def play(self) -> dict[str, Any]:
        before, nodes_before, pod_end = self.set_up()
        evening = self.evening(pod_end)
        self.morning(before, nodes_before)
        ready = self.readiness()
        spec_same = self.compare_slice(before[SLICE])
        saved = self.report_savings()
        return {"before": before, "evening": evening, "ready": ready,
                "spec_differences": spec_same, "savings": saved,
                "records": list(self.watch.records)}

    # -- 1. pools --------------------------------------------------------------------
    def set_up(self) -> tuple[dict[str, dict[str, Any]], dict[str, int], dt.datetime]:
        setup = self.day.close - SETUP_BEFORE_CLOSE
        days: dict[str, list[str]] = {}
        for day, ws in self.schedule.on_hours.items():
            days.setdefault(" ".join(w.text() for w in ws), []).append(day[:3])
        windows = "; ".join(f"{', '.join(d)} {text}" for text, d in days.items())
        print(f"\n1. schedule {SCHEDULE} ({self.schedule.time_zone}): {windows}; pools are "
              f"restored {self.day.lead.seconds // 60} min before on-hours")
        self.tick(setup)
        print(f"   static pools created at {self.day.clock(setup)} through the GKE API, "
              f"labelled accelops.dev/schedule={SCHEDULE}:")
        for pool in self.pools:
            gke.create_node_pool_from_spec(self.cluster.settings, pool.spec)
        self.tick(setup + self.every)  # creates take 90 s (single host) to 180 s
        self.cluster.wait_for("the pools' nodes", lambda: all(
            self.cluster.nodes().get(p.name, 0) >= p.spec["initial_node_count"]
            for p in self.pools))
        specs = self.cluster.specs()
        before = {p.name: specs[p.name] for p in self.pools}
        nodes = self.cluster.nodes()
        for pool in self.pools:
            print(f"   {pool.name:<13} {pool.what}: {nodes.get(pool.name, 0)} node(s), "
                  f"{before[pool.name]['status']}")
        pod_end = self.day.close + POD_ENDS_AFTER_CLOSE
        run = (pod_end - self.clock.now()).total_seconds()
        self.cluster.kube.create(PODS, busy_pod(POD, NAMESPACE, BUSY_POOL, 4, run))
        self.cluster.wait_for(f"pod {POD} to run", lambda: self.cluster.pod_phase(
            POD, NAMESPACE) == "Running")
        print(f"   pod {NAMESPACE}/{POD} runs on {BUSY_POOL} until about "
              f"{self.day.clock(pod_end)}")
        return before, {p.name: nodes.get(p.name, 0) for p in self.pools}, pod_end

    # -- 2. evening ------------------------------------------------------------------
    def _all_down(self) -> bool:
        specs, nodes = self.cluster.specs(), self.cluster.nodes()
        return all(is_down(specs.get(p.name), nodes.get(p.name, 0))
                   for p in self.pools if not p.kept)

    def evening(self, pod_end: dt.datetime) -> dt.datetime:
        """Tick until every scheduled pool is down; returns when that was seen."""
        at = self.day.close - SWEEP_BEFORE_CLOSE
        print(f"\n2. evening: the clock jumps to {self.day.clock(at)}; on-hours end at "
              f"{self.day.clock(self.day.close)}; pool_schedule ticks every "
              f"{self.every.seconds // 60} min")
        self.story.reset()
        pod_done = False
        while True:
            if not pod_done and at >= pod_end:
                self.clock.advance_to(pod_end + dt.timedelta(seconds=30))
                self.cluster.wait_for(f"pod {POD} to finish", lambda: self.cluster.pod_phase(
                    POD, NAMESPACE) in ("Succeeded", "Failed"))
                pod_done = True
                self.story.event(pod_end, f"pod {NAMESPACE}/{POD} finished: "
                                 f"{self.cluster.pod_phase(POD, NAMESPACE)}")
            self.tick(at)
            if at > self.day.close and self._all_down():
                break
            if at - self.day.close > EVENING_LIMIT:
                raise ScheduleDemoError(f"pools still up at {self.day.clock(at)}")
            at += self.every
        self.story.done()
        nodes = self.cluster.nodes()
        specs = self.cluster.specs()
        saved = self.cluster.saved()
        states = [f"{p.name} " + (f"{nodes.get(p.name, 0)} node(s)" if p.name in specs
                                  else "deleted")
                  + (" (kept: accelops.dev/keep=true)" if p.kept else "") for p in self.pools]
        print(f"   at {self.day.clock(at)}: {'; '.join(states)}")
        print(f"   saved while removed (ConfigMaps in {self.config.slices.state_namespace}): "
              f"{', '.join(saved)}")
        return at

    # -- 3. morning ------------------------------------------------------------------
    def morning(self, before: dict[str, dict[str, Any]], nodes_before: dict[str, int]) -> None:
        restore = self.day.open - self.day.lead
        at = restore - MORNING_BEFORE_RESTORE
        print(f"\n3. morning: the clock jumps to {self.day.clock(at)}; on-hours start at "
              f"{self.day.clock(self.day.open)}, restores at {self.day.clock(restore)}")
        while True:
            self.tick(at)
            specs, nodes = self.cluster.specs(), self.cluster.nodes()
            back = all(is_as_before(specs.get(p.name), nodes.get(p.name, 0), before[p.name],
                                    nodes_before[p.name]) for p in self.pools)
            if back and not self.cluster.saved():
                break
            if at >= self.day.open:
                raise ScheduleDemoError(f"pools not back by {self.day.clock(at)}")
            at += self.every
        self.story.done()

    def readiness(self) -> dict[str, dt.datetime]:
        rows = [r for r in self.watch.records if r["action"] == "restore"]
        operations = self.cluster.operations()
        ready: dict[str, dt.datetime] = {}
        print(f"\n   {'pool':<13} {'restore started':<16} {'RUNNING again':<18} on-hours start")
        for row in sorted(rows, key=lambda r: str(r["pool"])):
            started = dt.datetime.fromisoformat(row["at"])
            when = ready_at(operations, row["pool"], started)
            if when is None:
                raise ScheduleDemoError(f"{row['pool']}: no finished restore operation")
            ready[row["pool"]] = when
            early = (self.day.open - when).total_seconds() / 60
            verdict = f"{early:.0f} min early" if early >= 0 else f"LATE by {-early:.0f} min"
            print(f"   {row['pool']:<13} {self.day.clock(started):<16} "
                  f"{self.day.clock(when, seconds=True):<18} "
                  f"{self.day.clock(self.day.open)}  {verdict}")
        late = [pool for pool, when in ready.items() if when > self.day.open]
        if late:
            raise ScheduleDemoError(f"not ready by {self.day.clock(self.day.open)}: "
                                    f"{', '.join(late)}")
        return ready

    # -- 4. the recreated slice ------------------------------------------------------
    def compare_slice(self, before: dict[str, Any]) -> list[str]:
        after = self.cluster.specs()[SLICE]
        differences = spec_differences(before, after, OUTPUT_ONLY)
        compared = len(flat_spec(before, OUTPUT_ONLY))
        print(f"\n4. {SLICE} read back after its recreation: ", end="")
        if differences:
            print("its spec differs:\n" + "\n".join(f"   {d}" for d in differences))
            raise ScheduleDemoError(f"{SLICE} was recreated with a different spec")
        topology = (after.get("placement_policy") or {}).get("tpu_topology")
        print(f"the same spec as before ({compared} fields compared, output-only fields "
              f"aside): {after['config']['machine_type']} {topology}, "
              f"{after['initial_node_count']} nodes, labels "
              f"{', '.join(f'{k}={v}' for k, v in sorted(after['config']['labels'].items()))}")
        return differences

    # -- 5. savings ------------------------------------------------------------------
    def report_savings(self) -> list[Saving]:
        found = savings(self.watch.records)
        now = self.clock.now()
        print("\n5. accelerator-hours saved, from the pool_action audit rows on the "
              f"{self.config.topics.loadtest_metrics} topic")
        print(f"   {'pool':<13} {'accelerator':<22} {'count':>5}  {'removed':<14} "
              f"{'restored':<14} {'hours':>6} {'accel-hours':>11}")
        for item in found:
            print(f"   {item.pool:<13} {item.accelerator_type or '-':<22} "
                  f"{item.accelerators:>5}  {self.day.clock(item.removed):<14} "
                  f"{self.day.clock(item.restored) if item.restored else '-':<14} "
                  f"{item.hours(now):>6.2f} {item.accelerator_hours(now):>11.1f}")
        total = sum(item.accelerator_hours(now) for item in found)
        print(f"   total: {total:.1f} accelerator-hours")
        return found
