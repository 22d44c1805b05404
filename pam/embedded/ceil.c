// Compiled into pam_keyway.so by scripts/build-module.sh, and only there.
//
// In Embedded Swift the standard library's hash tables (Dictionary, Set) size themselves with `ceil`, which lives in
// libm. Loading libm costs every host of the module 0.13 ms and 350 KB (docs/BENCHMARKS.md, "The module's build and
// load"), so the module carries this one function itself. It is local to the module (pam/exports.map exports only pam_sm_*), so nothing
// else in the host sees it. Exact for every double: NaN, infinities and values of 2^52 and more are already whole;
// the rest go through a 64-bit integer, and the sign is copied back so ceil(-0.5) is -0.0 as C requires.
double ceil(double x) {
    if (!(__builtin_fabs(x) < 4503599627370496.0)) return x;
    double truncated = (double)(long long)x;
    if (truncated < x) truncated += 1.0;
    return __builtin_copysign(truncated, x);
}
