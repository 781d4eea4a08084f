"""The worker check while a result comes back forgets the workers no cell asks about."""

from __future__ import annotations

import concurrent.futures

from taskcell.runner import bounded


def _answered_future() -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result({"type": "Worker"})
    return future


def test_a_worker_asked_about_long_ago_is_forgotten_and_one_in_question_kept(monkeypatch):
    asking = {
        ("c", "tcp://old"): _answered_future(),
        ("c", "tcp://recent"): _answered_future(),
        ("c", "tcp://in-flight"): concurrent.futures.Future(),  # a question not answered yet
    }
    answers = {("c", "tcp://old"): 10.0, ("c", "tcp://recent"): 990.0}
    monkeypatch.setattr(bounded, "_asking", asking)
    monkeypatch.setattr(bounded, "_answers", answers)
    bounded._forget_idle(before=500.0)
    assert set(asking) == {("c", "tcp://recent"), ("c", "tcp://in-flight")}
    assert set(answers) == {("c", "tcp://recent")}
