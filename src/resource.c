/* resource: not written yet */
