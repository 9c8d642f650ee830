/* cdi: not written yet */
