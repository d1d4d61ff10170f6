"""Prometheus text exposition through prometheus_client's parser (gpucluster.promtext)."""

from __future__ import annotations

import math

import pytest

from gpucluster.promtext import Sample, parse


@pytest.mark.parametrize(("escaped", "value"), [
    # An escaped backslash followed by "n" is a backslash and an "n", not a newline: the old parser
    # replaced \n before \\ and turned this into a line break.
    (r"C:\\new", "C:\\new"),
    (r"a\\\"b", 'a\\"b'),        # backslash, then an escaped quote
    (r"line1\nline2", "line1\nline2"),
    (r"say \"hi\"", 'say "hi"'),
    (r"ends with \\", "ends with \\"),
])
def test_label_values_are_unescaped_in_one_pass(escaped, value):
    [sample] = parse(f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",err_msg="{escaped}"}} 79\n')
    assert sample == Sample("DCGM_FI_DEV_XID_ERRORS", {"gpu": "0", "err_msg": value}, 79.0)


def test_families_comments_timestamps_and_special_values():
    text = ("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
            'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 41 1700000000000\nDCGM_FI_DEV_GPU_TEMP{gpu="1"} NaN\n'
            "up +Inf\n")
    samples = parse(text)
    assert [(s.name, s.labels) for s in samples] == [
        ("DCGM_FI_DEV_GPU_TEMP", {"gpu": "0"}), ("DCGM_FI_DEV_GPU_TEMP", {"gpu": "1"}), ("up", {})]
    assert samples[0].value == 41 and math.isnan(samples[1].value) and samples[2].value == math.inf


@pytest.mark.parametrize("text", ['m{a="x"}\n', 'm{a="x} 1\n', "not a sample line\n"])
def test_malformed_exposition_is_refused(text):
    with pytest.raises(ValueError, match="not Prometheus text exposition"):
        parse(text)


def test_a_counter_keeps_the_name_it_was_exposed_with():
    # prometheus_client's families rename such samples to ..._TOTAL_total (OpenMetrics); Prometheus, and
    # the alert rules querying it, see the exposed name.
    text = ("# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\nDCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu=\"0\"} 2\n"
            "# TYPE requests_total counter\nrequests_total 5\n")
    assert [s.name for s in parse(text)] == ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "requests_total"]
