# Read by ctest after the discovered GoogleTest tests (TEST_INCLUDE_FILES in
# CMakeLists.txt): the tests that take more than about 20 s in the release
# build on a 2-core machine get the label slow, beside their binary's own
# label, so that `ctest -LE slow` is a quick run and `ctest -L slow` the rest.
# Patterns, not names: a parameterized test's name carries its parameters.
set(ts_slow_tests
    "^Classroom\\.NoListedWordInAThousandSampledContinuations$"
    "^BundledModel\\.ValidationLossAgreesWithPyTorchAndTheModelCard$"
    "^DraftModel\\.ValidationLossAgreesWithPyTorchAndTheModelCard$"
    "^BundledLlama\\.ValidationLossAgreesWithPyTorchAndTheModelCard$"
    "^Cli\\.EveryFlagGivenTwiceIsRefused$"
    "^PresentationLayout\\.RooflineLabelsKeepOffThePointsAndEachOther$"
    "^Gui\\.LanesStepTogetherShowTheirSummaryAndABranchBecomesTheViewedLane$"
    "^Gui\\.AnalysisPanelsShowRoofsCacheComparisonAndLogitLens$"
    "LessonsInOrder\\.EveryStepShowsItsPanelAndTheStateItsTextDescribes/1920x1080_")

# Gives the slow tests of one binary (its discovered tests, <binary>_TESTS)
# `labels`: its own label and slow (set_tests_properties replaces the list).
function(ts_label_slow binary labels)
  foreach(test IN LISTS ${binary}_TESTS)
    foreach(pattern IN LISTS ts_slow_tests)
      if(test MATCHES "${pattern}")
        set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
        break()
      endif()
    endforeach()
  endforeach()
endfunction()

ts_label_slow(ts_tests "slow")
ts_label_slow(ts_cli_tests "cli;slow")
ts_label_slow(ts_gui_tests "gui;slow")
