/* h2: not written yet */
