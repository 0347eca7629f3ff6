/*
 * space.c - how long enumerating and filtering a space takes.
 *
 * A space of 9 parameters whose full product is 442,368 combinations, with four T1-style
 * constraints (chained comparisons, modulo, a product bound) that keep over 10^5 of them,
 * plus the convolution_milo space of ../shared/benchmark_hub written out by hand. Each is
 * enumerated several times; the fastest run counts. Prints RESULT lines.
 *
 * Usage: space [--rounds R]
 */
#include <kerntune.h>
#include <kerntune/variants.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        kt_status st_ = (call);                                                                      \
        if (st_ != KT_OK) {                                                                          \
            fprintf(stderr, "space: %s: %s: %s\n", #call, kt_status_name(st_), kt_last_error());    \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

static double time_enumerate(kt_space *sp, int rounds, size_t *count) {
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        CHECK(kt_space_enumerate(sp, count));
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    int rounds = 5;
    if (argc == 3 && strcmp(argv[1], "--rounds") == 0) rounds = atoi(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: space [--rounds R]\n");
        return 2;
    }
    if (rounds < 1) rounds = 1;

    kt_space *big;
    CHECK(kt_space_create(&big));
    CHECK(kt_space_add_param(big, "block_x", "[16, 32, 48, 64, 96, 128, 192, 256]"));
    CHECK(kt_space_add_param(big, "block_y", "[1, 2, 4, 8, 16, 32]"));
    CHECK(kt_space_add_param(big, "tile_x", "range(1, 9)"));
    CHECK(kt_space_add_param(big, "tile_y", "range(1, 9)"));
    CHECK(kt_space_add_param(big, "unroll", "[0, 1, 2, 4]"));
    CHECK(kt_space_add_param(big, "vector", "[1, 2, 4]"));
    CHECK(kt_space_add_param(big, "use_shmem", "[0, 1]"));
    CHECK(kt_space_add_param(big, "prefetch", "[0, 1, 2]"));
    CHECK(kt_space_add_param(big, "swizzle", "[False, True]"));
    CHECK(kt_space_add_constraint(big, "32 <= block_x * block_y <= 1024"));
    CHECK(kt_space_add_constraint(big, "use_shmem == 0 or (block_x * tile_x + 14) * (block_y * tile_y + 14) < 12 * 1024"));
    CHECK(kt_space_add_constraint(big, "tile_x % vector == 0"));
    CHECK(kt_space_add_constraint(big, "prefetch == 0 or unroll > 0"));
    size_t n_big;
    double t_big = time_enumerate(big, rounds, &n_big);

    kt_space *conv;
    CHECK(kt_space_create(&conv));
    CHECK(kt_space_add_param(conv, "block_size_x", "[16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256]"));
    CHECK(kt_space_add_param(conv, "block_size_y", "[1, 2, 4, 8, 16]"));
    CHECK(kt_space_add_param(conv, "tile_size_x", "[1, 2, 3, 4]"));
    CHECK(kt_space_add_param(conv, "tile_size_y", "[1, 2, 3, 4]"));
    CHECK(kt_space_add_param(conv, "read_only", "[0, 1]"));
    CHECK(kt_space_add_param(conv, "use_padding", "[0, 1]"));
    CHECK(kt_space_add_param(conv, "use_shmem", "[0, 1]"));
    CHECK(kt_space_add_param(conv, "use_cmem", "[1]"));
    CHECK(kt_space_add_param(conv, "filter_height", "[15]"));
    CHECK(kt_space_add_param(conv, "filter_width", "[15]"));
    CHECK(kt_space_add_constraint(conv, "use_padding==0 or block_size_x % 32 != 0"));
    CHECK(kt_space_add_constraint(conv, "block_size_x*block_size_y<=1024"));
    CHECK(kt_space_add_constraint(conv, "use_padding==0 or use_shmem != 0"));
    CHECK(kt_space_add_constraint(conv, "use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+(filter_height-1)))) < 12*1024"));
    size_t n_conv;
    double t_conv = time_enumerate(conv, rounds, &n_conv);

    printf("%-18s %12s %14s %12s\n", "space", "product", "valid configs", "ms (best)");
    printf("%-18s %12d %14zu %12.2f\n", "synthetic-9param", 8 * 6 * 8 * 8 * 4 * 3 * 2 * 3 * 2, n_big, t_big * 1e3);
    printf("%-18s %12d %14zu %12.2f\n", "convolution_milo", 16 * 5 * 4 * 4 * 2 * 2 * 2, n_conv, t_conv * 1e3);
    printf("RESULT space_enumerate_synthetic_ms %.2f ms\n", t_big * 1e3);
    printf("RESULT space_enumerate_synthetic_configs %zu configs\n", n_big);
    printf("RESULT space_enumerate_ns_per_valid_config %.1f ns\n", t_big * 1e9 / (double)n_big);
    printf("RESULT space_enumerate_convolution_ms %.2f ms\n", t_conv * 1e3);
    kt_space_destroy(big);
    kt_space_destroy(conv);
    return 0;
}
