"""`gpucluster cost`: the worked example, Prometheus query_range input, snapshot files, bad input."""

from __future__ import annotations

import csv
import io
import json
import threading
import urllib.parse
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpucluster.cli import entrypoint
from gpucluster.cost import data

LOCAL = str(Path(__file__).resolve().parents[2] / "inventories" / "local")
DAY0 = 1_793_491_200  # 2026-11-01T00:00:00Z
H100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA L4"


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = entrypoint(["cost", "-i", LOCAL, *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def write_worked_example(tmp_path: Path) -> Path:
    path = tmp_path / "worked.csv"
    path.write_text("start,end,namespace,model,allocatedGpus,activity\n"
                    "2026-11-01T00:00:00Z,2026-11-02T00:00:00Z,ml-research,H100-SXM5-80GB,4,0.35\n")
    return path


def test_worked_example_from_a_csv_snapshot(capsys, tmp_path):
    # 4 GPUs x 24 h = 96 GPU-h; x 2.50 = 240 gross; 35% useful -> 62.4 idle GPU-h x 2.50 = 156.
    rc, out, _ = run(capsys, "--snapshot", str(write_worked_example(tmp_path)), "-o", "json")
    assert rc == 0
    doc = json.loads(out)
    row = doc["rows"][0]
    assert (row["tenant"], row["model"], row["rate"]) == ("ml-research", "H100-SXM5-80GB", 2.5)
    assert row["allocatedGpuHours"] == 96.0 and row["usefulGpuHours"] == 33.6
    assert row["grossCost"] == 240.0 and row["idleCost"] == 156.0 and row["usefulCost"] == 84.0
    assert doc["total"]["grossCost"] == 240.0 and doc["hours"] == 24.0 and doc["currency"] == "USD"


def test_worked_example_table_and_csv(capsys, tmp_path):
    snap = str(write_worked_example(tmp_path))
    rc, table, _ = run(capsys, "--snapshot", snap)
    assert rc == 0
    line = next(row for row in table.splitlines() if row.startswith("ml-research  ml-research"))
    assert line.split()[-6:] == ["96.000", "33.600", "35.0%", "240.00", "84.00", "156.00"]
    rc, text, _ = run(capsys, "--snapshot", snap, "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["scope"] for r in rows] == ["namespace", "tenant", "model", "total"]
    assert rows[-1]["grossCost"] == "240.0" and rows[-1]["idleCost"] == "156.0"


def test_json_snapshot_with_used_gpus_and_a_clipped_range(capsys, tmp_path):
    snap = {"kind": data.SNAPSHOT_KIND, "version": 1, "usage": [
        {"start": DAY0, "end": DAY0 + 86400, "namespace": "inference", "model": "L4",
         "allocatedGpus": 2, "usedGpus": 0.5},
        {"start": DAY0, "end": DAY0 + 3600, "namespace": "scratch", "model": "H200-141GB",
         "allocatedGpus": 1, "activity": 1}]}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    # Only the first 12 hours: inference 2 x 12 = 24 GPU-h x 0.45 = 10.80; useful 6 GPU-h = 2.70.
    rc, out, _ = run(capsys, "--snapshot", str(path), "--start", str(DAY0), "--end", "2026-11-01T12:00:00Z",
                     "-o", "json")
    assert rc == 0
    doc = json.loads(out)
    rows = {r["namespace"]: r for r in doc["rows"]}
    assert rows["inference"]["grossCost"] == 10.8 and rows["inference"]["idleCost"] == 8.1
    assert rows["scratch"]["tenant"] == "scratch (no tenant)" and rows["scratch"]["idleCost"] == 0.0
    assert {m["model"]: m["grossCost"] for m in doc["byModel"]} == {"H200-141GB": 3.2, "L4": 10.8}
    assert doc["total"]["grossCost"] == 14.0


class FakePrometheus:
    """A tiny query_range endpoint on 127.0.0.1 serving recorded series at the requested step.

    ``series`` maps a query to [(labels, value, from_ts, to_ts)]: a constant value between two times.
    """

    def __init__(self, series: dict[str, list[tuple[dict, str, int, int]]]) -> None:
        self.series, self.requests = series, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlparse(self.path)
                q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                outer.requests.append(q)
                start, end, step = Decimal(q["start"]), Decimal(q["end"]), Decimal(q["step"])
                result = []
                for labels, value, lo, hi in outer.series.get(q["query"], []):
                    points, t = [], start
                    while t <= end:
                        if lo <= t < hi:
                            points.append([float(t), value])
                        t += step
                    if points:
                        result.append({"metric": labels, "values": points})
                body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakePrometheus:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _recorded(day: int = DAY0) -> dict:
    research = {"namespace": "ml-research", "modelName": H100}
    inference = {"namespace": "inference", "modelName": L4}
    return {
        data.ALLOCATED: [(research, "4", day, day + 86400), (inference, "2", day, day + 43200)],
        data.USED: [(research, "1.4", day, day + 86400), (inference, "0.5", day, day + 43200)],
    }


def test_prometheus_query_range(capsys, tmp_path):
    with FakePrometheus(_recorded()) as prom:
        rc, out, err = run(capsys, "--prometheus", prom.url, "--start", "2026-11-01T00:00:00Z",
                           "--end", "2026-11-02T00:00:00Z", "--step", "1h", "-o", "json",
                           "--save-snapshot", str(tmp_path / "saved.json"))
    assert rc == 0, err
    rows = {r["namespace"]: r for r in json.loads(out)["rows"]}
    # DCGM's product names are priced through the catalog key.
    assert rows["ml-research"]["model"] == "H100-SXM5-80GB"
    assert (rows["ml-research"]["grossCost"], rows["ml-research"]["idleCost"]) == (240.0, 156.0)
    assert (rows["inference"]["allocatedGpuHours"], rows["inference"]["grossCost"]) == (24.0, 10.8)
    assert {r["query"] for r in prom.requests} == {data.ALLOCATED, data.USED}
    assert {r["step"] for r in prom.requests} == {"3600"}
    # The saved snapshot reproduces the same report offline.
    rc, again, _ = run(capsys, "--snapshot", str(tmp_path / "saved.json"), "-o", "json",
                       "--start", "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z")
    assert rc == 0 and json.loads(again)["rows"] == json.loads(out)["rows"]


def test_long_ranges_are_split_below_the_point_limit(capsys):
    days = 10
    rec = {q: [(lbl, v, DAY0, DAY0 + days * 86400) for lbl, v, *_ in s] for q, s in _recorded().items()}
    with FakePrometheus(rec) as prom:
        rc, out, _ = run(capsys, "--prometheus", prom.url, "--start", str(DAY0),
                         "--end", str(DAY0 + days * 86400), "--step", "1m", "-o", "json")
    assert rc == 0
    assert json.loads(out)["total"]["allocatedGpuHours"] == 6 * 24 * days
    per_query = [r for r in prom.requests if r["query"] == data.ALLOCATED]
    assert len(per_query) == 2  # 14,400 one-minute points > 10,000 per request


def test_missing_used_series_is_named(capsys):
    rec = _recorded()
    rec[data.USED] = rec[data.USED][:1]
    with FakePrometheus(rec) as prom:
        rc, _, err = run(capsys, "--prometheus", prom.url, "--start", str(DAY0), "--end", str(DAY0 + 86400))
    assert rc == 2
    assert f'missing series {data.USED}{{namespace="inference", modelName="{L4}"}}' in err


def test_no_allocation_series_at_all(capsys):
    with FakePrometheus({}) as prom:
        rc, _, err = run(capsys, "--prometheus", prom.url, "--start", str(DAY0), "--end", str(DAY0 + 86400))
    assert rc == 2 and f"no {data.ALLOCATED} series" in err and "recording rules" in err


def test_unreachable_prometheus_is_a_clear_failure(capsys):
    with FakePrometheus({}) as prom:
        url = prom.url
    rc, _, err = run(capsys, "--prometheus", url, "--start", "-1h")
    assert rc == 1 and "cannot reach Prometheus" in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "message"), [
    # start == end: nothing to report
    (["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-01T00:00:00Z"], "empty time range"),
    (["--start", "2026-11-03T00:00:00Z", "--end", "2026-11-04T00:00:00Z"], "no GPU usage between"),
    (["--start", "yesterday"], "is not a time"),
])
def test_bad_ranges(capsys, tmp_path, args, message):
    rc, _, err = run(capsys, "--snapshot", str(write_worked_example(tmp_path)), *args)
    assert rc == 2 and message in err, err


@pytest.mark.parametrize(("model", "hint"), [
    ("B200", "cost: {rates: {B200: 2.50}}"),  # in the catalog, not priced in this inventory
    ("NVIDIA B200", "cost: {rates: {B200: 2.50}}"),  # DCGM's product name → catalog key in the hint
    ("Mystery GPU", "cost: {rates: {Mystery GPU: 2.50}}"),
])
def test_unknown_gpu_model_without_a_rate(capsys, tmp_path, model, hint):
    path = tmp_path / "s.csv"
    path.write_text(f"start,end,namespace,model,allocatedGpus,activity\n{DAY0},{DAY0 + 3600},x,{model},1,0.5\n")
    rc, _, err = run(capsys, "--snapshot", str(path))
    assert rc == 2
    assert f"no rate for GPU model '{model}' (namespace x) in cost.rates of" in err and "cluster.yaml" in err
    assert hint in err


@pytest.mark.parametrize(("text", "suffix", "message"), [
    ("start,end,namespace,model,allocatedGpus\n1,2,a,L4,1\n", ".csv", "exactly one of usedGpus"),
    ("start,end,namespace,model,allocatedGpus,activity\n1,2,a,L4,1,35\n", ".csv", "must be ≤ 1 (35% is 0.35)"),
    ("start,end,namespace,model,allocatedGpus,activity\n1,2,,L4,1,0.3\n", ".csv", ":2: missing namespace"),
    ("start,end,namespace,model,allocatedGpus,usedGpus\n1,2,a,L4,1,2\n", ".csv", "exceeds allocatedGpus"),
    ("start,end,namespace,model,allocatedGpus,activity\n", ".csv", "no rows"),
    ("{not json", ".json", "not JSON"),
    ('{"kind": "other"}', ".json", "not a cost snapshot"),
])
def test_bad_snapshots(capsys, tmp_path, text, suffix, message):
    path = tmp_path / f"snap{suffix}"
    path.write_text(text)
    rc, _, err = run(capsys, "--snapshot", str(path))
    assert rc == 2 and message in err, err
    assert "Traceback" not in err


def test_exactly_one_source(capsys, tmp_path):
    assert run(capsys)[0] == 2
    rc, _, err = run(capsys, "--snapshot", str(write_worked_example(tmp_path)), "--prometheus", "http://127.0.0.1:1")
    assert rc == 2 and "exactly one source" in err
    rc, _, err = run(capsys, "--snapshot", str(tmp_path / "missing.json"))
    assert rc == 2 and "no such snapshot file" in err
