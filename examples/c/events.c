/*
 * events.c -- segment events: a local segment hears programs connect and disconnect (or
 * exit without disconnecting), once through a callback on a library thread and once by
 * waiting for them.
 *
 *   events owner                  (creates segments 31, with a callback, and 32)
 *   events user <owner node> [exit]
 *   events keeper                 (creates segment 33 and waits to be killed)
 *   events watcher <keeper node>  (connects to 33 with a callback, hears the keeper go)
 *
 * The owner waits for two users: one that connects to both segments and disconnects, and
 * one (`exit`) that connects to segment 32 and exits without disconnecting. The watcher's
 * connection callback hears SCI_CB_LOST when the keeper is killed. Built by smartio's test
 * suite with -Wall -Werror -Wextra.
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ADAPTER 0
#define SIZE 65536

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

static const char *reason_name(sci_segment_cb_reason_t r)
{
    switch (r) {
    case SCI_CB_CONNECT:
        return "SCI_CB_CONNECT";
    case SCI_CB_DISCONNECT:
        return "SCI_CB_DISCONNECT";
    case SCI_CB_NOT_OPERATIONAL:
        return "SCI_CB_NOT_OPERATIONAL";
    case SCI_CB_OPERATIONAL:
        return "SCI_CB_OPERATIONAL";
    case SCI_CB_LOST:
        return "SCI_CB_LOST";
    }
    return "?";
}

static volatile int heard = 0;

static sci_callback_action_t on_event(void *arg, sci_local_segment_t segment,
                                      sci_segment_cb_reason_t reason, unsigned int node,
                                      unsigned int adapter, sci_error_t error)
{
    (void)arg;
    (void)segment;
    printf("owner: callback: %s from node %u on adapter %u (%s)\n", reason_name(reason), node,
           adapter, error == SCI_ERR_OK ? "SCI_ERR_OK" : "an error");
    fflush(stdout);
    heard++;
    return heard == 2 ? SCI_CALLBACK_CANCEL : SCI_CALLBACK_CONTINUE;
}

static sci_local_segment_t offer(sci_desc_t sd, unsigned int id, sci_cb_local_segment_t cb)
{
    sci_error_t err;
    sci_local_segment_t seg;
    SCICreateSegment(sd, &seg, id, SIZE, cb, NULL, cb ? SCI_FLAG_USE_CALLBACK : SCI_NO_FLAGS,
                     &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(seg, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(seg, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    return seg;
}

static void await_event(sci_local_segment_t seg)
{
    sci_error_t err;
    unsigned int node = 0, adapter = 0;
    sci_segment_cb_reason_t r = SCIWaitForLocalSegmentEvent(seg, &node, &adapter, 30000,
                                                            SCI_NO_FLAGS, &err);
    check("SCIWaitForLocalSegmentEvent", err);
    printf("owner: waited: %s from node %u on adapter %u\n", reason_name(r), node, adapter);
    fflush(stdout);
}

static int owner(sci_desc_t sd)
{
    sci_error_t err;
    sci_local_segment_t called = offer(sd, 31, on_event);
    sci_local_segment_t waited = offer(sd, 32, NULL);
    SCIWaitForLocalSegmentEvent(waited, NULL, NULL, 0, SCI_NO_FLAGS, &err);
    printf("owner: nothing yet: %s\n",
           err == SCI_ERR_TIMEOUT ? "SCI_ERR_TIMEOUT" : SCIGetErrorString(err));
    printf("owner: ready\n");
    fflush(stdout);
    /* The first user: connects to both, disconnects both. */
    await_event(waited);
    await_event(waited);
    time_t deadline = time(NULL) + 30;
    while (heard < 2 && time(NULL) < deadline) {
        sched_yield();
    }
    /* The second user exits still connected. */
    await_event(waited);
    await_event(waited);
    SCIRemoveSegment(called, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    SCIRemoveSegment(waited, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    printf("owner: done\n");
    return 0;
}

static int user(sci_desc_t sd, unsigned int owner_node, int leave)
{
    sci_error_t err;
    sci_remote_segment_t a, b;
    if (!leave) {
        SCIConnectSegment(sd, &a, owner_node, 31, ADAPTER, NULL, NULL, 30000, SCI_NO_FLAGS, &err);
        check("SCIConnectSegment", err);
    }
    SCIConnectSegment(sd, &b, owner_node, 32, ADAPTER, NULL, NULL, 30000, SCI_NO_FLAGS, &err);
    check("SCIConnectSegment", err);
    if (leave) {
        printf("user: exiting connected\n");
        exit(0);
    }
    SCIDisconnectSegment(b, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    SCIDisconnectSegment(a, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    printf("user: connected and disconnected\n");
    return 0;
}

static volatile int lost = 0;

static sci_callback_action_t on_remote_event(void *arg, sci_remote_segment_t segment,
                                             sci_segment_cb_reason_t reason, sci_error_t status)
{
    (void)arg;
    (void)segment;
    printf("watcher: callback: %s (%s)\n", reason_name(reason),
           status == SCI_ERR_OK ? "SCI_ERR_OK" : "an error");
    fflush(stdout);
    if (reason == SCI_CB_LOST) {
        lost = 1;
        return SCI_CALLBACK_CANCEL;
    }
    return SCI_CALLBACK_CONTINUE;
}

static int keeper(sci_desc_t sd)
{
    offer(sd, 33, NULL);
    printf("keeper: ready\n");
    fflush(stdout);
    /* Killed long before this. */
    time_t deadline = time(NULL) + 60;
    while (time(NULL) < deadline) {
        sched_yield();
    }
    return 1;
}

static int watcher(sci_desc_t sd, unsigned int keeper_node)
{
    sci_error_t err;
    sci_remote_segment_t seg;
    SCIConnectSegment(sd, &seg, keeper_node, 33, ADAPTER, on_remote_event, NULL, 30000,
                      SCI_FLAG_USE_CALLBACK, &err);
    check("SCIConnectSegment", err);
    printf("watcher: connected\n");
    fflush(stdout);
    time_t deadline = time(NULL) + 30;
    while (!lost && time(NULL) < deadline) {
        sched_yield();
    }
    if (!lost) {
        fprintf(stderr, "watcher: never heard the keeper go\n");
        return 1;
    }
    SCIDisconnectSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    printf("watcher: disconnected from the lost segment\n");
    return 0;
}

int main(int argc, char **argv)
{
    int needs_node = strcmp(argv[argc > 1 ? 1 : 0], "user") == 0 ||
                     strcmp(argv[argc > 1 ? 1 : 0], "watcher") == 0;
    if (argc < 2 || (needs_node && argc < 3)) {
        fprintf(stderr,
                "usage: %s owner | user <owner node> [exit] | keeper | watcher <keeper node>\n",
                argv[0]);
        return 2;
    }
    sci_error_t err;
    sci_desc_t sd;
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);
    int rc;
    if (strcmp(argv[1], "owner") == 0) {
        rc = owner(sd);
    } else if (strcmp(argv[1], "keeper") == 0) {
        rc = keeper(sd);
    } else if (strcmp(argv[1], "watcher") == 0) {
        rc = watcher(sd, (unsigned int)strtoul(argv[2], NULL, 0));
    } else {
        int leave = argc > 3 && strcmp(argv[3], "exit") == 0;
        rc = user(sd, (unsigned int)strtoul(argv[2], NULL, 0), leave);
    }
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return rc;
}
