// Xlib and cairo for keyway-lock (the X11 lock screen): Xlib holds the grabs and reads keys with the server's own
// keymap (XLookupString), cairo draws the grid. Only the keyway-lock target imports this module.
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/keysym.h>
#include <cairo/cairo.h>
#include <cairo/cairo-xlib.h>
