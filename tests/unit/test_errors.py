"""Ack versus retry is decided by the error types, once (shared/errors.py)."""

from __future__ import annotations

import pytest

from shared import errors


@pytest.mark.parametrize(("error", "retry", "severity"), [
    (errors.PermanentError, False, "error"),
    (errors.NotFoundError, False, "error"),
    (errors.AlreadyExistsError, False, "error"),
    (errors.InvalidEventError, False, "error"),
    (errors.ForbiddenError, False, "error"),
    (errors.UnavailableError, True, "warning"),
    (errors.RateLimitedError, True, "warning"),
    (errors.OperationInProgressError, True, "warning"),
    (errors.DeploymentError, True, "error"),
    (errors.ConfigError, True, "error"),
    (errors.MissingTargetError, True, "error"),
    (errors.PermissionDeniedError, True, "error"),
])
def test_each_error_type_says_whether_its_event_is_retried_and_how_loudly_it_is_logged(
    error, retry, severity
):
    assert (error.retry, error.severity) == (retry, severity)


def test_every_deployment_mistake_is_retried_and_never_a_permanent_refusal():
    deployment = [c for c in vars(errors).values()
                  if isinstance(c, type) and issubclass(c, errors.DeploymentError)]

    assert {c.__name__ for c in deployment} >= {"ConfigError", "MissingTargetError",
                                                "PermissionDeniedError"}
    assert not any(issubclass(c, errors.PermanentError) for c in deployment)
