"""The after-training half: a saved model put to use.

`dmo evaluate`, `dmo threshold` (re-fit, re-target, adapt), `dmo predict`, `dmo monitor` and `dmo info` work on a
model file that training wrote; they read a model, push a table through it once, and judge or move its
operating point. Training (`dmocli/pipelines/`) never imports this package.
"""
