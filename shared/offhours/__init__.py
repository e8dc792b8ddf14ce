"""Off-hours removal of static node pools, and their restore before on-hours.

``pool_schedule`` runs on a Cloud Scheduler tick. Each tick is level-triggered: it
computes what every scheduled pool should be *now* (``windows``), compares it with
what the pools are (``observe``), and starts the next step of each difference
(``plan`` decides, ``tick`` acts), so a missed tick is caught up by the next one.
"""
