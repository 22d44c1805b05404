// x-probe: what another X client tries against keyway-lock, for the lock screen's tests
// (Tests/PAMTests/LockScreenTests.swift). Built by `make harness` with gcc; nothing Keyway ships links it.
//
//   x-probe grab    grab the keyboard and the pointer (10 tries, 50 ms apart); prints what X answered; exit 0 when
//                   both grabs were had (the screen was not locked), 1 when refused
//   x-probe raise   map a window of its own over the screen (override-redirect, as a locker or a popup would),
//                   raise it, wait 1.5 s, and print the name of the window on top; exit 0 when its own is on top
//   x-probe top     print the name of the topmost mapped window
//   x-probe hold S  grab the keyboard (as a menu or another locker would), print "held", keep it S seconds
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *grab_name(int status) {
    switch (status) {
    case GrabSuccess: return "GrabSuccess";
    case AlreadyGrabbed: return "AlreadyGrabbed";
    case GrabFrozen: return "GrabFrozen";
    case GrabNotViewable: return "GrabNotViewable";
    case GrabInvalidTime: return "GrabInvalidTime";
    default: return "unknown";
    }
}

static int ignore_errors(Display *display, XErrorEvent *event) {
    (void)display;
    (void)event;
    return 0;
}

static void top_name(Display *display, char *out, size_t size) {
    Window root_return, parent, *children = NULL;
    unsigned int count = 0;
    snprintf(out, size, "(none)");
    if (!XQueryTree(display, DefaultRootWindow(display), &root_return, &parent, &children, &count)) return;
    for (int i = (int)count - 1; i >= 0; i--) {  // bottom to top: the last mapped one is on top
        XWindowAttributes attributes;
        if (!XGetWindowAttributes(display, children[i], &attributes) || attributes.map_state != IsViewable) continue;
        char *name = NULL;
        if (XFetchName(display, children[i], &name) && name) {
            snprintf(out, size, "%s", name);
            XFree(name);
        } else {
            snprintf(out, size, "0x%lx", children[i]);
        }
        break;
    }
    if (children) XFree(children);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: x-probe grab|raise|top|hold SECONDS\n");
        return 2;
    }
    Display *display = XOpenDisplay(NULL);
    if (!display) {
        fprintf(stderr, "x-probe: cannot open the display\n");
        return 2;
    }
    XSetErrorHandler(ignore_errors);
    Window root = DefaultRootWindow(display);
    if (strcmp(argv[1], "grab") == 0) {
        int keyboard = -1, pointer = -1;
        for (int i = 0; i < 10; i++) {
            keyboard = XGrabKeyboard(display, root, False, GrabModeAsync, GrabModeAsync, CurrentTime);
            pointer = XGrabPointer(display, root, False, ButtonPressMask, GrabModeAsync, GrabModeAsync, None, None,
                                   CurrentTime);
            if (keyboard == GrabSuccess && pointer == GrabSuccess) break;
            usleep(50000);
        }
        printf("keyboard: %s\npointer: %s\n", grab_name(keyboard), grab_name(pointer));
        return keyboard == GrabSuccess && pointer == GrabSuccess ? 0 : 1;
    }
    if (strcmp(argv[1], "raise") == 0) {
        XSetWindowAttributes attributes = {0};
        attributes.override_redirect = True;
        attributes.background_pixel = 0xFFFF00;
        Window window = XCreateWindow(display, root, 0, 0, DisplayWidth(display, 0), DisplayHeight(display, 0), 0,
                                      CopyFromParent, InputOutput, CopyFromParent, CWOverrideRedirect | CWBackPixel,
                                      &attributes);
        XStoreName(display, window, "x-probe");
        XMapRaised(display, window);
        XSync(display, False);
        for (int i = 0; i < 15; i++) {
            XRaiseWindow(display, window);
            XSync(display, False);
            usleep(100000);
        }
        usleep(500000);
        char name[256];
        top_name(display, name, sizeof name);
        printf("on top: %s\n", name);
        return strcmp(name, "x-probe") == 0 ? 0 : 1;
    }
    if (strcmp(argv[1], "hold") == 0 && argc == 3) {
        int status = XGrabKeyboard(display, root, False, GrabModeAsync, GrabModeAsync, CurrentTime);
        XSync(display, False);
        printf("%s\n", status == GrabSuccess ? "held" : grab_name(status));
        fflush(stdout);
        sleep((unsigned)atoi(argv[2]));
        return status == GrabSuccess ? 0 : 1;
    }
    if (strcmp(argv[1], "top") == 0) {
        char name[256];
        top_name(display, name, sizeof name);
        printf("%s\n", name);
        return 0;
    }
    fprintf(stderr, "x-probe: unknown request %s\n", argv[1]);
    return 2;
}
