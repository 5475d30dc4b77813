from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.grid.kernel_groups import execution_order, kernel_groups

GRID = {"study": "g", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [4, 1], "compile_modes": ["eager", "reduce-overhead", "default"]},
    {"models": ["resnet"], "batch_sizes": [16], "compile_modes": ["default"], "runs": 5, "blocks": 1},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager"]}]}


def test_batches_ascending_each_with_its_compiled_modes_in_their_order_then_eager_each_once():
    pairs = [("eager", 4), ("reduce-overhead", 1), ("eager", 1), ("default", 4), ("eager", 4), ("default", 1)]
    assert execution_order(pairs) == [("reduce-overhead", 1), ("default", 1), ("eager", 1),
                                      ("default", 4), ("eager", 4)]
    # a dynamic batch's compilation serves its mode's next batch sizes: mode after mode
    assert execution_order(pairs, by_batch=False) == [("reduce-overhead", 1), ("default", 1), ("default", 4),
                                                      ("eager", 1), ("eager", 4)]


def test_a_group_is_one_model_with_one_set_of_settings_and_ids_stay_unique():
    groups = kernel_groups(parse_grid(GRID).cells)
    assert [g.group_id for g in groups] == ["image-classification__resnet__float32__cpu",
                                            "image-classification__resnet__float32__cpu__2",  # runs 5
                                            "image-segmentation__segformer__float32__cpu"]
    first = groups[0]
    assert first.pairs() == [["reduce-overhead", 1], ["default", 1], ["eager", 1], ["reduce-overhead", 4],
                             ["default", 4], ["eager", 4]]
    assert {(c.compile_mode, c.batch_size) for c in first.eager_sharing_pairs()} == {("eager", 1), ("eager", 4)}
    assert groups[2].eager_sharing_pairs() == set()  # eager alone: timed by itself
    assert first.without(first.cells[:2]).pairs()[0] == ["eager", 1]


def test_each_memory_format_and_shapes_gets_a_kernel_of_its_own():
    grid = {"study": "g", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
        {"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager", "default"],
         "memory_formats": ["contiguous", "channels_last"], "shapes": ["static", "dynamic"]}]}
    groups = kernel_groups(parse_grid(grid).cells)
    assert [g.group_id for g in groups] == [
        "image-classification__resnet__float32__cpu",
        "image-classification__resnet__float32__dynamic__cpu",
        "image-classification__resnet__float32__channels_last__cpu",
        "image-classification__resnet__float32__channels_last__dynamic__cpu"]
    dynamic = groups[1]
    assert dynamic.pairs() == [["default", 1], ["default", 4]]  # no eager: it is the static kernel's
    assert all(c.settings.shapes == "dynamic" and c.settings.memory_format == "contiguous" for c in dynamic.cells)
    assert groups[2].first.settings.memory_format == "channels_last"


def test_an_eager_cell_shares_only_the_pairs_of_a_compiled_cell_that_warmed_up_as_it():
    # a CUDA-graph mode set to warm up once warms up twice (variants.cell_plan): its eager side is no eager cell,
    # so the eager cell is timed by itself, and priced so
    def sharing(grid):
        (group,) = kernel_groups(parse_grid(grid).cells)
        return {(c.compile_mode, c.batch_size) for c in group.eager_sharing_pairs()}

    graphs_only = {"study": "g", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager", "reduce-overhead"]}]}
    assert sharing(graphs_only) == set()
    assert sharing({**graphs_only, "warmup": 2}) == {("eager", 1)}
    with_default = {**graphs_only, "grids": [{**graphs_only["grids"][0],
                                              "compile_modes": ["eager", "reduce-overhead", "default"]}]}
    assert sharing(with_default) == {("eager", 1)}


def test_several_workers_take_every_first_replicate_before_any_second():
    from bench_utils.study.grid.kernel_groups import for_workers

    grid = parse_grid({"study": "s", "runs": 30, "blocks": 3, "replicates": 3, "grids": [
        {"models": ["resnet", "vit", "beit"], "batch_sizes": [1], "compile_modes": ["eager", "default"]}]})
    groups = kernel_groups(grid.cells)
    named = lambda order: [f"{g.first.settings.replicate} {g.first.model}" for g in order]  # noqa: E731
    # one worker: the grid's staggered order, a kernel's next replicate after another kernel's first
    assert named(for_workers(groups, 1)) == ["r1 resnet", "r1 vit", "r2 resnet", "r1 beit", "r2 vit", "r3 resnet",
                                             "r2 beit", "r3 vit", "r3 beit"]
    # two side by side: r2 resnet two groups behind r1 resnet could start while it runs
    assert named(for_workers(groups, 2)) == ["r1 resnet", "r1 vit", "r1 beit", "r2 resnet", "r2 vit", "r2 beit",
                                             "r3 resnet", "r3 vit", "r3 beit"]


def test_the_first_replicate_in_a_run_is_its_first_or_the_earliest_left():
    from bench_utils.study.grid.kernel_groups import first_replicates_in

    cells = parse_grid({"study": "s", "runs": 30, "blocks": 3, "replicates": 3, "grids": [
        {"models": ["resnet", "vit"], "batch_sizes": [1], "compile_modes": ["default"]}]}).cells
    named = lambda chosen: sorted(f"{c.settings.replicate} {c.model}" for c in chosen)  # noqa: E731
    assert named(first_replicates_in(cells)) == ["r1 resnet", "r1 vit"]
    # resnet's first measured by an earlier run, vit's first two
    left = [c for c in cells if (c.model, c.settings.replicate) not in {("resnet", "r1"), ("vit", "r1"), ("vit", "r2")}]
    assert named(first_replicates_in(left)) == ["r2 resnet", "r3 vit"]
