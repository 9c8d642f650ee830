/* daemon: not written yet */
