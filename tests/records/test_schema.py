from bench_utils.records.schema import CELL_FIELDS, CellBlock, ConfigBlock, LatencyBlock, PhasesBlock
from bench_utils.records.key import VARIANT_FIELDS
from bench_utils.records.build import measurement_settings
from bench_utils.settings import Settings
from bench_utils.study.cell.kernel_start import START_PHASES
from bench_utils.study.cell.time_by_phase import Phases
from sample_records import ok_record


def test_the_cell_block_is_the_identity_then_the_variant_in_the_order_records_have_it():
    # every record's cell so far; the grid's Cell and the results frame's leading columns follow it
    assert CELL_FIELDS == ("study", "task", "model", "batch_size", "compile_mode", "dtype", "device")
    assert list(CellBlock.__annotations__) == [*CELL_FIELDS, *VARIANT_FIELDS]
    assert list(ok_record()["cell"]) == list(CellBlock.__annotations__)


def test_the_builders_write_the_keys_their_block_types_name():
    assert set(ok_record()["latency"]) == set(LatencyBlock.__annotations__)
    assert set(measurement_settings(Settings())) | {"weights"} <= set(ConfigBlock.__annotations__)
    # what kernels started ahead and compile ahead wrote (an earlier design): read, never written any more
    written_before = {"started_ahead_s", "gate_wait_s", "compile_wait_s"}
    assert set(Phases().to_dict()) | {*START_PHASES, "load_s"} == set(PhasesBlock.__annotations__) - written_before


def test_a_records_status_is_one_of_the_vocabularys():
    from typing import get_args

    from bench_utils.records.schema import Status as RecordStatus
    from bench_utils.vocabulary import Status

    assert set(get_args(RecordStatus)) == set(Status)


def test_a_block_follows_a_switch_only_where_the_block_before_it_was_the_other_sides():
    from bench_utils.records.schema import SpeedupBlock

    # blocks run b c | b c | c b: eager's first follows the warm-up, its second and third follow compiled's;
    # compiled's third opens its pair after compiled's own block, which closed the pair before
    switched = SpeedupBlock(mean=1.5, order="bbc").after_a_switch()
    assert switched == {"eager": [False, True, True], "compiled": [True, True, False]}
    assert SpeedupBlock(mean=1.5, order="bcbc").after_a_switch() == {"eager": [False, True, False, True],
                                                                      "compiled": [True, False, True, False]}
    assert SpeedupBlock(mean=1.5).after_a_switch() is None
    assert SpeedupBlock(mean=1.5, order="cxb").after_a_switch() is None
