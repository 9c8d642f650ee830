/* allocate: not written yet */
