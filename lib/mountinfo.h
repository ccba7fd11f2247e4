/* SPDX-License-Identifier: MIT */
/* /proc/self/mountinfo fields, for library code that looks up mounts. */
#ifndef GS_MOUNTINFO_H
#define GS_MOUNTINFO_H

/* Undo mountinfo's octal escapes (\ooo for blank, tab, newline, backslash) in place. */
void gs_mountinfo_unescape(char *s);

#endif
