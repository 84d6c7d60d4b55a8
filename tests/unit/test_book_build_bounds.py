"""What scheduling alone could reach (the build's processor time over the cores): :func:`helpers.plan.work_bounds`,
which benchmarks/book_build.py records and the Performance page computes for older recordings."""
import pytest

from helpers.plan import work_bounds

from tolerances import decimals  # noqa: E402


@pytest.mark.parametrize("cores", [1, 2, 16])
def test_the_packed_time_is_the_processor_time_over_the_cores(cores):
    floor = {"seconds_floor": 240.0, "cpu_seconds_floor": 360.0}
    out = work_bounds(1440.0, floor, cores)
    assert out["cores"] == cores
    # tolerance: seconds are recorded with 1 decimal, ratios with 2
    assert out["seconds_packed"] == pytest.approx(1440.0 / cores, rel=0, abs=decimals(1, 1440.0))
    assert out["ratio_packed_over_floor"] == pytest.approx(1440.0 / cores / 240.0, rel=0, abs=decimals(2, 6.0))
    assert out["ratio_cpu_over_floor_cpu"] == 4.0  # the work: 1,440 processor-s against the floor's 360


def test_without_a_floor_or_its_processor_time_the_ratios_are_left_out():
    assert work_bounds(1000.0, None, 2) == {"cores": 2, "seconds_packed": 500.0, "ratio_packed_over_floor": None}
    older = work_bounds(1000.0, {"seconds_floor": 250.0}, 2)  # a floor recorded before its processor time was
    assert older["ratio_packed_over_floor"] == 2.0 and "ratio_cpu_over_floor_cpu" not in older
