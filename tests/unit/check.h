/*
 * check.h - the C unit tests' one shared check macro.  Each check prints
 * one line ("ok - what" or "FAIL - what (file:line)"); CHECK_EXIT() ends
 * the program non-zero if any check failed.
 */
#ifndef DLBN_CHECK_H
#define DLBN_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_count;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		check_count++;                                                                     \
		if (cond) {                                                                        \
			printf("ok - ");                                                           \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		} else {                                                                           \
			check_failures++;                                                          \
			printf("FAIL - ");                                                         \
			printf(__VA_ARGS__);                                                       \
			printf(" (%s:%d: %s)\n", __FILE__, __LINE__, #cond);                       \
		}                                                                                  \
	} while (0)

#define CHECK_EXIT()                                                                               \
	do {                                                                                       \
		printf("%s: %d check(s), %d failed\n", __FILE__, check_count, check_failures);     \
		return check_failures ? 1 : 0;                                                     \
	} while (0)

#endif /* DLBN_CHECK_H */
