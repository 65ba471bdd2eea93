"""The Flight SQL catalog answers: catalogs, schemas, tables (with their Arrow schemas),
table types and SqlInfo, each as the Arrow table whose schema FlightSql.proto fixes.

They come from DuckDB's ``information_schema`` over the same committed snapshot
the queries read, weir's bookkeeping tables (``_weir*``) left out. Flight SQL's
filter patterns are SQL LIKE patterns (``%``, ``_``), given to DuckDB's LIKE.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa

import weir
from weir.shell.flightsql import protocol as pb

CATALOGS = pa.schema([pa.field("catalog_name", pa.utf8(), nullable=False)])
DB_SCHEMAS = pa.schema([pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8(), nullable=False)])
TABLES = pa.schema([pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8()),
                    pa.field("table_name", pa.utf8(), nullable=False),
                    pa.field("table_type", pa.utf8(), nullable=False)])
TABLES_WITH_SCHEMA = TABLES.append(pa.field("table_schema", pa.binary(), nullable=False))
TABLE_TYPES = pa.schema([pa.field("table_type", pa.utf8(), nullable=False)])

_SQL_INFO_VALUE = pa.dense_union([
    pa.field("string_value", pa.utf8()), pa.field("bool_value", pa.bool_()),
    pa.field("bigint_value", pa.int64()), pa.field("int32_bitmask", pa.int32()),
    pa.field("string_list", pa.list_(pa.field("item", pa.utf8()))),
    pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
], type_codes=[0, 1, 2, 3, 4, 5])
SQL_INFO = pa.schema([pa.field("info_name", pa.uint32(), nullable=False),
                      pa.field("value", _SQL_INFO_VALUE, nullable=False)])

#: DuckDB's table types as Flight SQL (and JDBC) name them.
_TABLE_TYPES = {"BASE TABLE": "TABLE", "VIEW": "VIEW"}

#: SqlInfo (FlightSql.proto's enum) -> this server's value: a str, bool or int32 (a bitmask or an ordinal).
SQL_INFO_VALUES: dict[int, str | bool | int] = {
    0: "weir",  # FLIGHT_SQL_SERVER_NAME
    1: weir.__version__,  # FLIGHT_SQL_SERVER_VERSION
    2: pa.__version__,  # FLIGHT_SQL_SERVER_ARROW_VERSION
    3: True,  # FLIGHT_SQL_SERVER_READ_ONLY
    4: True,  # FLIGHT_SQL_SERVER_SQL
    5: False,  # FLIGHT_SQL_SERVER_SUBSTRAIT
    8: 0,  # FLIGHT_SQL_SERVER_TRANSACTION: none (each query reads the latest commit)
    9: False,  # FLIGHT_SQL_SERVER_CANCEL
    504: '"',  # SQL_IDENTIFIER_QUOTE_CHAR
}


def schema_of(command: pb.Message) -> pa.Schema:
    if isinstance(command, pb.CommandGetTables):
        return TABLES_WITH_SCHEMA if command.include_schema else TABLES
    return {pb.CommandGetCatalogs: CATALOGS, pb.CommandGetDbSchemas: DB_SCHEMAS,
            pb.CommandGetTableTypes: TABLE_TYPES, pb.CommandGetSqlInfo: SQL_INFO}[type(command)]


def answer(cursor: duckdb.DuckDBPyConnection, command: pb.Message) -> pa.Table:
    if isinstance(command, pb.CommandGetCatalogs):
        return pa.table([[cursor.execute("SELECT current_database()").fetchall()[0][0]]], schema=CATALOGS)
    if isinstance(command, pb.CommandGetDbSchemas):
        rows = cursor.execute(
            "SELECT catalog_name, schema_name FROM information_schema.schemata WHERE catalog_name = current_database() "
            "AND (? IS NULL OR catalog_name = ?) AND schema_name LIKE coalesce(?, '%') ESCAPE '\\' "
            "ORDER BY 1, 2", [command.catalog, command.catalog, command.db_schema_filter_pattern]).fetchall()
        return pa.Table.from_pylist([dict(zip(DB_SCHEMAS.names, row)) for row in rows], schema=DB_SCHEMAS)
    if isinstance(command, pb.CommandGetTables):
        return _tables(cursor, command)
    if isinstance(command, pb.CommandGetTableTypes):
        return pa.table([sorted(set(_TABLE_TYPES.values()))], schema=TABLE_TYPES)
    if isinstance(command, pb.CommandGetSqlInfo):
        return sql_info(command.info)
    raise TypeError(type(command).__name__)


def _tables(cursor: duckdb.DuckDBPyConnection, command: pb.CommandGetTables) -> pa.Table:
    rows = cursor.execute(
        "SELECT table_catalog, table_schema, table_name, table_type FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND (? IS NULL OR table_catalog = ?) "
        "AND table_schema LIKE coalesce(?, '%') ESCAPE '\\' AND table_name LIKE coalesce(?, '%') ESCAPE '\\' "
        "AND table_name NOT LIKE '\\_weir%' ESCAPE '\\' ORDER BY 1, 2, 3",
        [command.catalog, command.catalog, command.db_schema_filter_pattern,
         command.table_name_filter_pattern]).fetchall()
    rows = [(c, s, t, _TABLE_TYPES.get(kind, kind)) for c, s, t, kind in rows]
    if command.table_types:
        rows = [row for row in rows if row[3] in command.table_types]
    columns = [list(column) for column in zip(*rows)] if rows else [[], [], [], []]
    if not command.include_schema:
        return pa.table(columns, schema=TABLES)
    schemas = [cursor.sql(f"SELECT * FROM {_name(c)}.{_name(s)}.{_name(t)} LIMIT 0").to_arrow_table()
               .schema.serialize().to_pybytes() for c, s, t, _ in rows]
    return pa.table([*columns, schemas], schema=TABLES_WITH_SCHEMA)


def sql_info(wanted: list[int]) -> pa.Table:
    """The SqlInfo rows asked for (all this server knows if none), as a dense union per row."""
    names = [n for n in (wanted or SQL_INFO_VALUES) if n in SQL_INFO_VALUES]
    children: list[list] = [[], [], [], []]  # string_value, bool_value, bigint_value, int32_bitmask
    types, offsets = [], []
    for name in names:
        value = SQL_INFO_VALUES[name]
        code = 0 if isinstance(value, str) else 1 if isinstance(value, bool) else 3
        types.append(code)
        offsets.append(len(children[code]))
        children[code].append(value)
    arrays = [pa.array(children[0], pa.utf8()), pa.array(children[1], pa.bool_()),
              pa.array(children[2], pa.int64()), pa.array(children[3], pa.int32()),
              pa.array([], pa.list_(pa.field("item", pa.utf8()))),
              pa.array([], pa.map_(pa.int32(), pa.list_(pa.int32())))]
    value = pa.UnionArray.from_dense(pa.array(types, pa.int8()), pa.array(offsets, pa.int32()), arrays,
                                     [f.name for f in _SQL_INFO_VALUE], list(_SQL_INFO_VALUE.type_codes))
    return pa.Table.from_arrays([pa.array(names, pa.uint32()), value], schema=SQL_INFO)


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
