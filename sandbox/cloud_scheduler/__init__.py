"""The Cloud Scheduler stand-in: the deployment definition's cron jobs, fired on the
simulated clock, publish to Pub/Sub (:mod:`.service`; :mod:`.cron` reads a unix-cron
schedule in a time zone). Not kube-scheduler: that is ``sandbox/cluster/kube_scheduler.py``."""
