"""Where the simulated NVML places GPU instances: valid starts, no overlap, every NVML-possible set fits."""

from __future__ import annotations

import itertools

import pytest

from gpucluster.simulator import nvml, placement


def spans(placed: list[placement.Placed]) -> list[set[int]]:
    return [set(range(p.start, p.start + p.size)) for p in placed]


@pytest.mark.parametrize("name", ["A100-40GB", "A100-80GB", "H100-SXM5-80GB", "A30"])
def test_every_set_of_up_to_four_profiles_is_placed_validly_or_refused(name: str) -> None:
    model = nvml.model(name)
    assert model.mig
    profiles = [p.name for p in model.mig.profiles]
    fitted = 0
    for n in range(1, 5):
        for combo in itertools.combinations_with_replacement(profiles, n):
            try:
                placed = placement.place(model, combo)
            except ValueError:
                continue
            fitted += 1
            assert sorted(p.profile for p in placed) == sorted(combo)
            for p in placed:
                starts, size = model.mig.placements[p.profile]
                assert p.start in starts and p.size == size
            used = spans(placed)
            assert sum(len(s) for s in used) == len(set().union(*used)), (combo, placed)
    assert fitted > 10


def test_a_balanced_layout_needs_the_backtracking_order() -> None:
    model = nvml.model("A100-80GB")
    placed = placement.place(model, ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"))
    assert [(p.profile, p.start) for p in placed] == [
        ("3g.40gb", 4), ("2g.20gb", 2), ("1g.10gb", 1), ("1g.10gb", 0)]


@pytest.mark.parametrize("combo, problem", [
    (("1g.10gb",) * 8, "exceeds"),
    (("4g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"), "do not fit"),  # 8 compute slices: no 1g start at 7
    (("9g.90gb",), "no MIG profile"),
])
def test_sets_nvml_refuses(combo, problem) -> None:
    with pytest.raises(ValueError, match=problem):
        placement.place(nvml.model("A100-80GB"), combo)
