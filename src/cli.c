/* cli: not written yet */
