"""What a job is: the job request, the policy that admits it, the JobSet rendered from
it, and every label and annotation key accelops writes on Kubernetes objects.

A leaf of the library: ``jobs``, ``slices``, ``serving`` and ``offhours`` import it;
it imports none of them (pyproject's import-linter layers say so).
"""
