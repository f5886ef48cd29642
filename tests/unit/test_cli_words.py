"""Issue 58, item 10: a mistyped option says what was wrong and the near name, for the command it was given to
(``mstop summary --jsn DIR`` printed the top-level usage; ``mstop --versoin`` was reported as a missing
RUN_DIR). Exit code 2, as any usage error."""

from __future__ import annotations

import pytest

from mstop.cli import main


@pytest.mark.parametrize("argv,said", [
    (["summary", "--jsn", "DIR"], "mstop summary: unknown option --jsn: did you mean --json? (mstop summary --help)"),
    (["--versoin"], "mstop: unknown option --versoin: did you mean --version? (mstop --help)"),
    (["DIR", "--polll", "3"], "mstop: unknown option --polll: did you mean --poll? (mstop --help)"),
    (["compare", "a", "b", "--formt=csv"], "mstop compare: unknown option --formt: did you mean --format?"),
    (["report", "a", "--out", "d", "--smothing", "0.5"], "mstop report: unknown option --smothing: did you mean "
                                                          "--smoothing?"),
    (["demo", "--zzz"], "mstop demo: unknown option --zzz (mstop demo --help)"),
])
def test_a_mistyped_option_is_named_with_the_near_one(capsys, argv, said):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "usage: mstop [-h] [-V] COMMAND" not in err, err
    assert "required: RUN_DIR" not in err


@pytest.mark.parametrize("argv", [
    ["summary", "--js", "/nonexistent-mstop-dir"],  # a unique prefix, as argparse allows
    ["summary", "-F", "--weird-file-name", "/nonexistent-mstop-dir"],  # an option's value is no option
    ["/nonexistent-mstop-dir", "--spike-k=2", "-o", "-v"],
    ["summary", "/nonexistent-mstop-dir", "--", "--not-an-option"],
])
def test_known_options_values_and_prefixes_pass_through(capsys, argv):
    main(argv)
    assert "unknown option" not in capsys.readouterr().err
