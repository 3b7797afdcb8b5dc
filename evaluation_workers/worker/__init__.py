"""The scoring worker: everything that needs Celery or the broker.

``app`` (the Celery app, its signed messages and queues), ``tasks`` (scoring
one submission: claim, fetch, score, report), ``attempts`` (which attempt of
a submission is current, and who claimed it, in the broker), ``presence``
(what each worker announces), ``deferred_intervals`` (intervals computed
after the score), ``significance`` (the paired-test task), ``pruning`` (the
retention of the per-unit outcomes) and ``metrics`` (what the worker serves
to Prometheus on ``EVAL_METRICS_PORT``). The site never imports this package:
it sends tasks by name (``evaluation_workers.contracts``) to queues named by
``evaluation_workers.queues``. The scoring core outside it never imports it
either; ``python -m evaluation_workers worker`` imports it when it starts one.
"""
