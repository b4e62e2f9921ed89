"""The handoff: the best (or a chosen) point as a bundle ops can deploy: repository, scripts, units, manifests.

bundle (write_bundle: the bundle's files and bundle.json), select (which point: the best as the report judges it,
or one by hand), paths (host paths as ${TRTSWEEP_*} variables, the model store's layout), server (the server's
command lines, ports and health paths), smoke (the smoke test), scripts (launch/*.sh, build/build.sh), units
(systemd), kubernetes (k8s/, data dumped as YAML), readme (README.md), render (the Jinja2 templates of templates/,
and render_repository.py shipped from there as it is).

May import: trtsweep.errors, trtsweep.common, trtsweep.runtime, trtsweep.toolchain, trtsweep.serve, trtsweep.perf,
trtsweep.sweep, trtsweep.report.
"""
