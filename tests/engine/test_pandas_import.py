"""engine/pandas_import.py: pyarrow leaves pandas unimported until something uses pandas, and
then treats pandas objects as it always does. Each case runs in a fresh interpreter: whether
pandas was ever imported is a fact about a whole process."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from weir.engine.pandas_import import arrow_array, numpy_values, scalar


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_typed_conversions_after_deferring_import_no_pandas():
    assert _run("""
        import sys
        import pyarrow as pa, pyarrow.compute as pc
        from weir.engine.pandas_import import defer_pandas, scalar
        defer_pandas()
        column = pa.array([1, 2, 3], pa.int64())
        pc.add(pc.multiply(column, scalar(2)), scalar(1)), pa.scalar(7, pa.uint64()), pa.array(["a"], pa.string())
        print("pandas" in sys.modules)
    """) == "False"


def test_without_deferring_pyarrow_imports_pandas_for_the_same_conversions():
    """The case defer_pandas exists for: pyarrow's check for pandas objects imports pandas."""
    assert _run("""
        import sys
        import pyarrow as pa
        pa.array([1, 2, 3], pa.int64())
        print("pandas" in sys.modules)
    """) == "True"


@pytest.mark.parametrize("first", ["import pandas as pd", "pa.table({'x': [1]}).to_pandas(); import pandas as pd"],
                         ids=["imported by the user", "imported by pyarrow"])
def test_pandas_imported_later_converts_as_without_deferring(first):
    """A Categorical becomes a dictionary array only if pyarrow knows pandas (else it is read as a
    sequence of strings); a nullable Int64 Series keeps its null; pd.NA and NaT in a list are null."""
    code = f"""
        import pyarrow as pa
        from weir.engine.pandas_import import defer_pandas
        defer_pandas()
        pa.array([1], pa.int64())
        {first}
        print(pa.types.is_dictionary(pa.array(pd.Categorical(["a", "b", "a"])).type))
        print(pa.array(pd.Series([1, None], dtype="Int64")).null_count, pa.array([1, pd.NA, pd.NaT], from_pandas=True).null_count)
        print(pa.Table.from_pandas(pd.DataFrame({{"x": pd.Series(["u", None], dtype="string")}})).column(0).null_count)
    """
    assert _run(code).splitlines() == ["True", "1 2", "1"]


@pytest.mark.parametrize("value", [3, -(2**40), 2.5, "x", True])
def test_scalar_is_what_pyarrow_would_infer(value):
    assert scalar(value).equals(pa.scalar(value))
    assert scalar(value).type == pa.scalar(value).type


@pytest.mark.parametrize("values", [
    pa.array(range(-5, 12), pa.int64()).slice(3),
    pa.array(range(9), pa.int32()),
    pa.array(range(9), pa.uint16()).slice(2, 5),
    pa.array([0.5, -1.25, 3.0], pa.float64()),
    pa.array([True, False, True, True, False, False, True, False, True, True], pa.bool_()).slice(3),
    pa.array([1, 2, 3], pa.timestamp("us")),
    pa.chunked_array([pa.array([1, 2], pa.int64()), pa.array([3], pa.int64())]),
    pa.chunked_array([pa.array([7, 8], pa.int64()).slice(1)]),
], ids=lambda v: str(v.type))
def test_numpy_values_are_the_arrays_values(values):
    got = numpy_values(values)
    expected = values.cast(pa.int64()) if pa.types.is_temporal(values.type) else values
    assert got.tolist() == expected.to_pylist() and len(got) == len(values)


def test_numpy_values_refuses_nulls():
    with pytest.raises(ValueError, match="without NULLs"):
        numpy_values(pa.array([1, None], pa.int64()))


@pytest.mark.parametrize("values", [
    np.arange(-5, 12, dtype=np.int64)[3:],
    np.arange(20, dtype=np.int64)[::3],  # strided: copied
    np.arange(9, dtype=np.int32),
    np.arange(9, dtype=np.uint16),
    np.array([0.5, -1.25, 3.0]),
    np.array([True, False, True, True, False, False, True, False, True, True])[3:],
    np.array([1, 2, 3], "datetime64[us]"),
    np.broadcast_to(np.int64(7), (5,)),  # stride 0
    np.zeros(0, np.int64),
], ids=lambda v: f"{v.dtype}-{v.strides}")
def test_arrow_array_is_what_pa_array_makes(values):
    got = arrow_array(values)
    got.validate(full=True)
    assert got.equals(pa.array(values)) and got.type == pa.array(values).type


def test_arrow_array_takes_a_null_mask_and_a_type():
    mask = np.array([False, True, False, False, False, False, False, False, True])
    got = arrow_array(np.arange(9, dtype=np.int64), mask=mask)
    got.validate(full=True)
    assert got.to_pylist() == [0, None, 2, 3, 4, 5, 6, 7, None] and got.null_count == 2
    assert arrow_array(np.arange(3, dtype=np.int64), pa.int32()).equals(pa.array([0, 1, 2], pa.int32()))


def test_arrow_array_refuses_what_has_no_arrow_buffer_layout():
    with pytest.raises(TypeError, match="numeric, temporal or boolean"):
        arrow_array(np.array(["a", "b"], object))
    with pytest.raises(TypeError, match="1-d"):
        arrow_array(np.zeros((2, 2), np.int64))


def test_reading_debezium_envelopes_imports_no_pandas():
    """A CDC source's changelog (Kafka's 'debezium-json') is made on every batch of the job."""
    code = textwrap.dedent("""
        import sys
        import pyarrow as pa
        from weir.engine.pandas_import import defer_pandas
        defer_pandas()
        from weir.engine.connectors.kafka_formats import debezium_changes
        schema = pa.schema([("id", pa.int64())])
        row = pa.struct(list(schema))
        envelopes = pa.table({"before": pa.array([None, {"id": 1}], row), "after": pa.array([{"id": 1}, {"id": 2}], row),
                              "op": pa.array(["c", "u"], pa.string())})
        changes = debezium_changes(envelopes, schema)
        print(changes.num_rows, "pandas" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "False"]
