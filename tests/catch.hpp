// One include for Catch2 v2 (single header, Debian 12) and v3 (split headers).
#pragma once
#if defined(TRELLIS_CATCH2_V3)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
