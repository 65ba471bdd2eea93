"""Enough of Postgres's catalog for psql's ``\\d``, ``\\dt``, ``\\dv`` and GUI clients.

DuckDB answers most of it itself (its ``pg_catalog`` views: pg_class,
pg_attribute, pg_type, pg_namespace, ``format_type``, ``pg_table_is_visible``).
What clients send that DuckDB does not read is mended here, for a query that
names the catalog (``wanted``), in two ways:

1. the text is rewritten: ``OPERATOR(pg_catalog.~)`` is ``~``, ``COLLATE
   pg_catalog.default`` goes, ``pg_catalog.f(`` (or ``information_schema.f(``) becomes ``f(`` for the functions
   of step 2 (and ``::pg_catalog.text`` ``::text``), ``::regclass`` / ``::regtype`` casts of a name become a lookup
   (``::regproc`` the name);
   ``pg_catalog.pg_class`` and ``information_schema.tables`` / ``columns`` leave
   out weir's bookkeeping tables (``_weir_*``);
2. the functions DuckDB lacks are defined on the query's cursor as temporary
   macros (``MACROS``): answers a read-only endpoint can give (owner ``weir``, no
   comments, no triggers).
"""
from __future__ import annotations

import functools
import re

import duckdb

_WANTED = re.compile(r"pg_|information_schema|::reg|format_type", re.I)

#: Functions that Postgres clients call and DuckDB does not have, as DuckDB macros.
MACROS = {
    "pg_get_userbyid": "(role) AS 'weir'",
    "pg_encoding_to_char": "(encoding) AS 'UTF8'",
    "pg_get_function_result": "(func) AS NULL",
    "pg_get_function_arguments": "(func) AS NULL",
    "pg_get_triggerdef": "(trigger) AS NULL, (trigger, pretty) AS NULL",
    "pg_get_expr": "(expr, rel) AS NULL, (expr, rel, pretty) AS NULL",
    "pg_get_indexdef": "(index) AS NULL, (index, col, pretty) AS NULL",
    "pg_get_constraintdef": "(con) AS NULL, (con, pretty) AS NULL",
    "pg_get_statisticsobjdef_columns": "(oid) AS NULL",
    "pg_relation_is_publishable": "(rel) AS false",
    "pg_total_relation_size": "(rel) AS 0",
    "pg_relation_size": "(rel) AS 0",
    "shobj_description": "(obj, catalog) AS NULL",
    "array_upper": "(arr, dimension) AS len(arr)",
    "has_database_privilege": "(db, privilege) AS true",
    # Postgres's is a set-returning function over an index's columns (pgjdbc's getPrimaryKeys);
    # DuckDB's pg_index is empty (it lists no primary keys), so only the query's form matters.
    "_pg_expandarray": "(arr) AS {'x': arr[1], 'n': 1}",
}

_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([^)\s]+)\s*\)", re.I)
_COLLATE = re.compile(r"\s+COLLATE\s+pg_catalog\.\"?default\"?", re.I)
#: Functions called as pg_catalog.f that DuckDB has (or ``MACROS`` defines) only unqualified.
UNQUALIFIED = (*MACROS, "array_to_string", "generate_series")
_QUALIFIED = re.compile(r"\b(?:pg_catalog|information_schema)\s*\.\s*(" + "|".join(UNQUALIFIED) + r")\s*\(", re.I)
_QUALIFIED_TYPE = re.compile(r"::\s*pg_catalog\s*\.\s*", re.I)
_REG_CAST = re.compile(r"('(?:[^']|'')*')\s*::\s*(?:pg_catalog\.)?(regclass|regtype|regproc)\b", re.I)
_OID_REG_CAST = re.compile(r"(\b[\w.]+)\s*::\s*(?:pg_catalog\.)?(reg[a-z]+)\b", re.I)
#: Catalog tables with the columns psql reads that DuckDB's lack, and without weir's own tables.
PATCHED = {
    "pg_class": "SELECT *, false AS relforcerowsecurity FROM pg_catalog.pg_class "
                "WHERE relname NOT LIKE '\\_weir%' ESCAPE '\\'",
    # typrelid 0 (not NULL) for a type that is no table's row, and DuckDB's own types in the
    # database's schema (their namespace is the in-memory catalog's, which pg_namespace does not
    # list): pgjdbc's getTypeInfo keeps only types that pass both.
    "pg_type": "SELECT * REPLACE (coalesce(typrelid, 0) AS typrelid, coalesce((SELECT min(n.oid) FROM "
               "pg_catalog.pg_namespace n WHERE n.oid = typnamespace), (SELECT min(n.oid) FROM "
               "pg_catalog.pg_namespace n WHERE n.nspname = 'main')) AS typnamespace) FROM pg_catalog.pg_type",
    "pg_database": "SELECT *, 'C' AS datcollate, 'C' AS datctype, NULL AS daticulocale, "
                   "'c' AS datlocprovider, NULL::VARCHAR[] AS datacl FROM pg_catalog.pg_database",
}
#: Catalog tables DuckDB lacks, that psql's \\d reads: empty, with the columns it names.
STUBS = {
    "pg_policy": "polname VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, "
                 "polwithcheck VARCHAR, polcmd VARCHAR, polrelid BIGINT",
    "pg_statistic_ext": "oid BIGINT, stxrelid BIGINT, stxnamespace BIGINT, stxname VARCHAR, stxkind VARCHAR[], "
                        "stxstattarget INTEGER",
    "pg_publication": "oid BIGINT, pubname VARCHAR, puballtables BOOLEAN",
    "pg_publication_namespace": "pnpubid BIGINT, pnnspid BIGINT",
    "pg_publication_rel": "prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]",
    "pg_inherits": "inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN",
    "pg_trigger": "oid BIGINT, tgrelid BIGINT, tgname VARCHAR, tgenabled VARCHAR, tgisinternal BOOLEAN, "
                  "tgparentid BIGINT",
    "pg_rewrite": "oid BIGINT, ev_class BIGINT, rulename VARCHAR, ev_enabled VARCHAR",
    "pg_foreign_table": "ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]",
    "pg_roles": "oid BIGINT, rolname VARCHAR",
    "pg_partitioned_table": "partrelid BIGINT, partstrat VARCHAR",
}
for _name, _columns in STUBS.items():
    PATCHED[_name] = "SELECT " + ", ".join(f"NULL::{t} AS {c}" for c, t in
                                           (item.strip().split(" ", 1) for item in _columns.split(","))) + \
        " WHERE false"
_PATCHED = re.compile(r"\bpg_catalog\.(" + "|".join(PATCHED) + r")\b", re.I)
_INFORMATION = re.compile(r"\binformation_schema\.(tables|columns)\b", re.I)


def wanted(sql: str) -> bool:
    return bool(_WANTED.search(sql))


@functools.lru_cache(maxsize=1024)  # clients send the same catalog queries again and again
def rewrite(sql: str) -> str:
    sql = _OPERATOR.sub(r"\1", sql)
    sql = _COLLATE.sub("", sql)
    sql = _QUALIFIED.sub(lambda match: match.group(1) + "(", sql)
    sql = _REG_CAST.sub(_lookup, sql)
    sql = _QUALIFIED_TYPE.sub("::", sql)
    sql = _OID_REG_CAST.sub(r"\1", sql)
    sql = _PATCHED.sub(_patched, sql)
    sql = _INFORMATION.sub(lambda match: f"(SELECT * FROM information_schema.{match.group(1)} "
                           "WHERE table_name NOT LIKE '\\_weir%' ESCAPE '\\')", sql)
    return sql


_ALIAS = re.compile(r"\s+(?!(?:where|join|left|right|inner|outer|full|cross|natural|on|using|order|group|"
                    r"having|limit|offset|union|except|intersect|window|qualify)\b)[A-Za-z_\"]", re.I)


def _patched(match: re.Match) -> str:
    """A patched catalog table, as a subquery named as the table unless the query names it
    (``pg_catalog.pg_type ... ORDER BY pg_type.oid`` as pgjdbc writes)."""
    name = match.group(1).lower()
    aliased = _ALIAS.match(match.string, match.end()) is not None
    return f"({PATCHED[name]})" + ("" if aliased else f" AS {name}")


def _lookup(match: re.Match) -> str:
    """``'name'::regclass`` -> the oid of the table of that name (``::regtype`` of the type)."""
    name = match.group(1)
    if match.group(2).lower() == "regproc":
        return name  # compared with pg_type.typinput (pgjdbc's array test), which DuckDB leaves NULL
    if match.group(2).lower() == "regtype":
        return f"(SELECT oid FROM pg_catalog.pg_type WHERE typname = {name} LIMIT 1)"
    return f"(SELECT oid FROM pg_catalog.pg_class WHERE relname = trim({name}, '\"') LIMIT 1)"


def prepare(cursor: duckdb.DuckDBPyConnection, sql: str) -> str:
    """Define the missing functions on this cursor and return the query rewritten."""
    sql = rewrite(sql)
    lowered = sql.lower()
    for name, body in MACROS.items():
        if name in lowered:
            cursor.execute(f"CREATE OR REPLACE TEMP MACRO {name}{body}")
    return sql
