"""Serving models from uploads: Triton and Saxml rollouts driven by Cloud Storage.

``deploy_model`` (an object finalized in the models bucket) checks a version's
manifest and files, writes an immutable release snapshot and starts a rollout;
``reconcile_models`` (a tick) watches rollouts and finishes or rolls them back;
``accelops models`` reads and drives the per-model ledger. See ``convention`` for
the upload layout, ``manifest`` for ``deploy.yaml``, ``triton`` for what a release
is, ``ledger`` for the record of every rollout.
"""
