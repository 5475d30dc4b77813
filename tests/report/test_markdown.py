from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import LRI, PDI, environment_label, mode_label


def test_environment_labels_translate_the_device_words_and_keep_names_left_to_right():
    en, es, ar = Catalog("en"), Catalog("es"), Catalog("ar")
    # English: frame's own names, unchanged
    for environment in ("CPU (AMD EPYC)", "CPU (unknown)", "GPU", "NVIDIA H100 80GB HBM3",
                        "CPU (EPYC) · torch 2.15.0", "GPU · torch 2.14.1"):
        assert environment_label(environment, en) == environment
    assert environment_label("CPU (unknown)", es) == "CPU (desconocido)"
    assert environment_label("CPU (AMD EPYC) · torch 2.15.0", es) == "CPU (AMD EPYC) · torch 2.15.0"
    assert environment_label("CPU (AMD EPYC)", ar) == f"وحدة المعالجة المركزية ({LRI}AMD EPYC{PDI})"
    assert environment_label("CPU (unknown)", ar) == "وحدة المعالجة المركزية (غير معروف)"
    assert environment_label("GPU · torch 2.15.0", ar) == f"وحدة معالجة الرسومات · {LRI}torch 2.15.0{PDI}"
    assert environment_label("NVIDIA H100", ar) == f"{LRI}NVIDIA H100{PDI}"  # a GPU's name as recorded
    # figures take no isolates
    assert environment_label("CPU (AMD EPYC) · torch 2.15.0", ar, isolate=False) == \
        "وحدة المعالجة المركزية (AMD EPYC) · torch 2.15.0"


def test_mode_labels_keep_the_torch_option_name():
    assert mode_label("reduce-overhead", Catalog("en")) == "reduce-overhead"
    assert mode_label("reduce-overhead", Catalog("es")) == "menos sobrecarga (reduce-overhead)"
    assert mode_label("reduce-overhead", Catalog("ar")) == f"تقليل الحمل الزائد ({LRI}reduce-\u2060overhead{PDI})"
    assert mode_label("some-new-mode", Catalog("ar")) == f"{LRI}some-\u2060new-\u2060mode{PDI}"  # as written


def test_a_region_no_figure_could_see_says_so_and_one_not_measured_is_a_dash():
    from bench_utils.report.frame import CPU_ALLOCATOR, NOT_MEASURABLE
    from bench_utils.report.markdown import region_mib

    assert region_mib(1.5 * 2**20, CPU_ALLOCATOR, Catalog("en")) == "1.5"
    assert region_mib(None, NOT_MEASURABLE, Catalog("es")) == "no medible aquí"
    assert region_mib(None, None, Catalog("en")) == "–"
