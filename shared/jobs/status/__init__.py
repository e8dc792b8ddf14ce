"""Where a job is, and why: a JobSet's state and its explanation, read from the
cluster's objects (JobSet, Jobs, pods, Kueue Workloads, slice failures).

``facts`` reads the objects into facts, ``queue`` explains Kueue's view, ``parts``
the slices and how the job ended, ``explain`` puts them together; ``model`` is the
answer's shape (the jobs API's and ``accelops jobs status``'s). All pure.
"""
