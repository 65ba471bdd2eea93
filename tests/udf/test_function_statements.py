"""Flink's CREATE and DROP FUNCTION spellings, parsed into weir's statements."""
from __future__ import annotations

import pytest

from weir.sql import parse
from weir.sql import statements as st
from weir.sql.errors import WeirSqlError


@pytest.mark.parametrize("text, temporary, system, exists", [
    ("CREATE FUNCTION f AS 'pkg.mod.f' LANGUAGE PYTHON", False, False, False),
    ("CREATE FUNCTION f AS 'pkg.mod.f'", False, False, False),
    ("CREATE TEMPORARY FUNCTION IF NOT EXISTS f AS 'pkg.mod.f' LANGUAGE PYTHON", True, False, True),
    ("create temporary system function f as 'pkg.mod.f' language python", True, True, False),
])
def test_create_function(text, temporary, system, exists):
    (s,) = parse(text)
    assert s == st.CreateFunction(line=1, col=1, text=text, name="f", target="pkg.mod.f", language="PYTHON",
                                  temporary=temporary, system=system, if_not_exists=exists)


@pytest.mark.parametrize("text, temporary, system, exists", [
    ("DROP FUNCTION f", False, False, False),
    ("DROP TEMPORARY FUNCTION IF EXISTS f", True, False, True),
    ("DROP TEMPORARY SYSTEM FUNCTION f", True, True, False),
])
def test_drop_function(text, temporary, system, exists):
    (s,) = parse(text)
    assert s == st.DropFunction(line=1, col=1, text=text, name="f", temporary=temporary, system=system,
                                if_exists=exists)


@pytest.mark.parametrize("text, message", [
    ("CREATE FUNCTION f AS 'a.b' LANGUAGE SCALA", "LANGUAGE SCALA is not supported: weir runs Python functions"),
    ("CREATE FUNCTION f 'a.b'", "CREATE FUNCTION needs AS 'module.function'"),
    ("CREATE FUNCTION f AS a.b", "CREATE FUNCTION needs AS 'module.function' as a string"),
    ("CREATE FUNCTION f AS 'a.b' USING JAR 'x.jar'", "unexpected 'USING'"),
])
def test_what_weir_cannot_read_is_refused_where_it_stands(text, message):
    with pytest.raises(WeirSqlError) as info:
        parse(text)
    assert info.value.problems[0].message.startswith(message)
