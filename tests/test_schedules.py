"""Behaviour of sbtf.common.schedules: SB2 values and plain-data round trips."""
import json

import numpy as np
import pytest

from sbtf.common import schedules as sch


def roundtrip(obj):
    data = json.loads(json.dumps(obj.to_dict()))
    assert data["__schedule__"] == type(obj).__name__
    return sch.schedule_from_dict(data)


def test_constant_schedule():
    s = sch.ConstantSchedule(0.5)
    assert s.value(0) == 0.5 and s.value(10 ** 6) == 0.5 and s(0.3) == 0.5
    r = roundtrip(s)
    assert isinstance(r, sch.ConstantSchedule) and r.value(7) == 0.5
    assert sch.ConstantSchedule(np.float32(0.25)).to_dict()["value"] == 0.25


def test_linear_schedule():
    s = sch.LinearSchedule(100, final_p=0.1, initial_p=1.0)
    assert s.value(0) == 1.0
    assert s.value(50) == pytest.approx(0.55)
    assert s.value(100) == pytest.approx(0.1) and s.value(1000) == pytest.approx(0.1)
    r = roundtrip(s)
    assert [r.value(t) for t in (0, 25, 200)] == [s.value(t) for t in (0, 25, 200)]
    assert sch.LinearSchedule(10, 0.0).initial_p == 1.0


def test_piecewise_schedule():
    s = sch.PiecewiseSchedule([(0, 1.0), (10, 0.5), (20, 0.0)], outside_value=-1.0)
    assert s.value(5) == pytest.approx(0.75)
    assert s.value(10) == pytest.approx(0.5)
    assert s.value(15) == pytest.approx(0.25)
    assert s.value(20) == -1.0 and s.value(-3) == -1.0
    r = roundtrip(s)
    assert [r.value(t) for t in (0, 5, 12, 25)] == [s.value(t) for t in (0, 5, 12, 25)]
    with pytest.raises(ValueError):
        sch.PiecewiseSchedule([(0, 1.0), (10, 0.0)]).value(11)
    with pytest.raises(ValueError):
        sch.PiecewiseSchedule([(10, 1.0), (0, 0.0)])
    custom = sch.PiecewiseSchedule([(0, 1.0), (10, 0.0)], interpolation=lambda left, right, alpha: left)
    assert custom.value(5) == 1.0
    with pytest.raises(TypeError):
        custom.to_dict()
    assert sch.schedule_to_dict(custom) is None


def test_linear_interpolation():
    assert sch.linear_interpolation(2.0, 4.0, 0.25) == 2.5


def test_named_progress_functions_match_sb2():
    assert sch.constant(0.7) == 1.0
    assert sch.linear_schedule(0.25) == 0.75
    assert sch.middle_drop(0.1) == pytest.approx(0.9) and sch.middle_drop(0.5) == pytest.approx(0.075)
    assert sch.double_linear_con(0.1) == pytest.approx(0.8) and sch.double_linear_con(0.5) == 0.125
    assert sch.double_middle_drop(0.1) == pytest.approx(0.9)
    assert sch.double_middle_drop(0.5) == pytest.approx(0.075)
    assert sch.double_middle_drop(0.9) == pytest.approx(0.125)


def test_scheduler():
    s = sch.Scheduler(initial_value=1e-3, n_values=100, schedule="linear")
    assert s.value() == pytest.approx(1e-3)
    assert s.value() == pytest.approx(1e-3 * 0.99)
    assert s.value_steps(50) == pytest.approx(5e-4)
    r = roundtrip(s)
    assert r.step == 2.0 and r.value() == pytest.approx(1e-3 * 0.98)
    assert sch.Scheduler(1.0, 10, sch.middle_drop).value_steps(9) == pytest.approx(0.075)
    with pytest.raises(ValueError):
        sch.Scheduler(1.0, 10, "nope")


def test_get_schedule_fn_and_constfn():
    fn = sch.get_schedule_fn(2.5e-4)
    assert isinstance(fn, sch.ConstantSchedule)
    assert fn(1.0) == 2.5e-4 and fn(0.0) == 2.5e-4
    assert sch.get_schedule_fn(3)(0.5) == 3
    assert sch.get_schedule_fn(np.float32(0.5))(0.1) == 0.5

    def user(frac):
        return frac * 1e-3

    assert sch.get_schedule_fn(user) is user
    with pytest.raises(TypeError):
        sch.get_schedule_fn("0.1")
    assert sch.constfn(7)("anything") == 7
    assert roundtrip(sch.constfn(0.2))(0.9) == 0.2


def test_sample_callable_and_sampled_schedule():
    def lr(frac):
        return frac * 3e-4 + 1e-5

    sampled = sch.sample_callable(lr)
    progress = [p for p, _ in sampled.points]
    assert progress == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    for p in (1.0, 0.9, 0.55, 0.0):
        assert sampled(p) == pytest.approx(lr(p))
    assert sampled(1.5) == pytest.approx(lr(1.0)) and sampled(-1.0) == pytest.approx(lr(0.0))
    r = roundtrip(sampled)
    assert r(0.33) == pytest.approx(sampled(0.33))

    step = sch.sample_callable(lambda f: 1.0 if f > 0.5 else 0.0, n=3)
    assert step.points == [(0.0, 0.0), (0.5, 0.0), (1.0, 1.0)]
    with pytest.raises(ValueError):
        sch.sample_callable(lr, n=1)
    with pytest.raises(TypeError):
        sch.sample_callable(lambda f: "high")


def test_schedule_to_dict_helpers():
    assert sch.schedule_to_dict(lambda f: f) is None
    data = sch.schedule_to_dict(sch.linear_schedule)
    assert data == {"__schedule__": "function", "name": "linear"}
    assert sch.schedule_from_dict(data) is sch.linear_schedule
    assert sch.is_schedule_dict(sch.ConstantSchedule(1.0).to_dict())
    assert not sch.is_schedule_dict({"value": 1.0}) and not sch.is_schedule_dict(3)


@pytest.mark.parametrize("bad", [
    {"value": 1.0},
    {"__schedule__": "os.system", "cmd": "echo hi"},
    {"__schedule__": "function", "name": "eval"},
    {"__schedule__": "ConstantSchedule"},
    {"__schedule__": "PiecewiseSchedule", "endpoints": [[0, 1]], "interpolation": "builtins.eval"},
    {"__schedule__": "ConstantSchedule", "value": "1+1"},
])
def test_schedule_from_dict_rejects_unknown(bad):
    with pytest.raises((ValueError, TypeError)):
        sch.schedule_from_dict(bad)


@pytest.mark.parametrize("name", sorted(sch.SCHEDULES))
def test_progress_schedule_gives_scheduler_values_per_update(name):
    """A2C/ACKTR (the value after n_batch per-sample steps) and ACER (value_steps) through the progress form."""
    total, n_batch, lr = 2000, 80, 7e-4
    scheduler = sch.Scheduler(initial_value=lr, n_values=total, schedule=name)
    progress_schedule = sch.ProgressSchedule(lr, name)
    for update in range(1, total // n_batch + 1):
        for _ in range(n_batch):
            expected = scheduler.value()
        got = progress_schedule(1.0 - (update * n_batch - 1.0) / total)
        if name == "double_linear_con":  # the elapsed progress is recomputed from the remaining one
            assert np.float32(got) == np.float32(expected) and got == pytest.approx(expected, rel=1e-12)
        else:
            assert got == expected
        acer_expected = scheduler.value_steps(update * n_batch)
        acer_got = progress_schedule(1.0 - (update * n_batch) / total)
        assert np.float32(acer_got) == np.float32(acer_expected)
        assert name == "double_linear_con" or acer_got == acer_expected
    assert roundtrip(progress_schedule)(0.3) == progress_schedule(0.3)
    assert sch.ProgressSchedule(lr, sch.SCHEDULES[name]).schedule_name == name
    with pytest.raises(ValueError):
        sch.ProgressSchedule(lr, "nope")
