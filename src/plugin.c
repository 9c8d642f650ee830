/* plugin: not written yet */
