# Mixed precision (included by both builds' e2e lists): the scripts in PRECISION_E2E_SCRIPTS
# (default: all four). The loss curves run one rank, so two of them can share the cores under
# ctest -j; loss scaling and the gradient wire run two.
if(NOT DEFINED PRECISION_E2E_SCRIPTS)
  set(PRECISION_E2E_SCRIPTS curves_mlp_cnn curves_gpt curves_llama loss_scaling_and_wire)
endif()
foreach(name IN LISTS PRECISION_E2E_SCRIPTS)
  if(name MATCHES "^curves")
    set(processors 1)
  else()
    set(processors 2)
  endif()
  trellis_add_e2e_test(NAME precision_${name} SCRIPT ${E2E}/precision/${name}.sh
                       PROCESSORS ${processors})
  set_tests_properties(e2e.precision_${name} PROPERTIES FIXTURES_REQUIRED fashion_data)
endforeach()
