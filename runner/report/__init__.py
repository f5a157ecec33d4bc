"""The report of a run and the comparison of runs: `build` (tables, markdown, HTML, summary
files), `step_system` (a step's system figures from its stored metrics), `hosts` / `plots`
(per-host tables, plots), `releases` (a sweep across Ceph releases), `compare` (run against
run). The `cephscope report` / `compare` commands are runner/report_cli.py and compare_cli.py.
"""
