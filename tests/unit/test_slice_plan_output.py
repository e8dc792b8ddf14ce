"""What `accelops slices plan` prints, on a hand-built report."""

from __future__ import annotations

from shared.slices.commands.reconcile import print_report as _print_report
from shared.slices.model import Observed, SliceFailure
from shared.slices.plan import plan_slices
from shared.slices.reconcile import ReconcileReport
from tests.unit.test_slice_planner import NOW, SETTINGS, jobset


def test_the_plan_output_names_the_failed_create_its_reason_and_the_next_attempt(capsys):
    stuck, fresh = jobset(name="stuck", slices=1), jobset(name="fresh", slices=2)
    failures = {stuck.key: SliceFailure(attempts=2, next_attempt=NOW + 90,
                                        reason="GCE_STOCKOUT: not enough resources",
                                        capacity="spot", pool="stuck-pool")}
    observed = Observed((stuck, fresh), ())
    plan = plan_slices(observed, SETTINGS, NOW, {}, failures)

    _print_report(ReconcileReport(plan, observed, blocked="dry run"))

    out = capsys.readouterr().out
    assert "failed: research/stuck: creating stuck-pool (spot) failed 2 time(s): " \
           "GCE_STOCKOUT: not enough resources; next attempt at 2027-01-15 08:01:30 UTC" in out
    assert out.count("  * create") == 2  # both slices of the other JobSet start now
